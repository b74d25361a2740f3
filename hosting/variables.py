"""Which launch variables a process server takes from a caller envhub does not trust to run code on its machine.

Such a caller (anyone but the admin, on a server with sign-in) gives a process server the variables its
environment declares (`variables` in its openenv.yaml or README card) and plain names, which only the
environment's own code reads. Names that Python, the dynamic loader, a shell, uvicorn, pip, git or another
tool reads as it starts, or that point one at files, certificates or proxies, could make the server run code
or read what is not the environment's (PYTHONWARNINGS imports a module, BROWSER names a command, UVICORN_LOG_CONFIG
a file uvicorn evaluates, BASH_ENV a script every shell runs): they are refused, declared or not. Names the Hub,
openenv and Spaces give a meaning to (HF_*, OPENENV_*, SPACE_*, ...) are taken only when declared.
"""

import re
from collections.abc import Collection, Mapping

from core.errors import InvalidInputError

__all__ = ["ensure_plain_variables"]

# Read (upper-cased) by an interpreter, the loader, a shell, a server or a tool a server may run.
_STEERING_PREFIXES = (
    "PYTHON",  # every one of them, with no exceptions: PYTHONWARNINGS alone imports any module
    "LD_",
    "DYLD_",
    "GLIBC_",
    "GCONV_",
    "MALLOC_",
    "JE_",
    "UVICORN_",
    "GRADIO_",
    "OTEL_",
    "ENVHUB_",
    "PIP_",
    "UV_",
    "CONDA_",
    "VIRTUAL_ENV",
    "SSL_",
    "OPENSSL_",
    "REQUESTS_",
    "CURL_",
    "GIT_",
    "SSH_",
    "BASH_",
    "GEM_",
    "NPM_CONFIG_",
    "PERL5",
    "XDG_",
    "DOCKER_",
    "GTK_",  # GTK_MODULES: libraries GTK loads
    "GDK_",
    "GIO_",  # GIO_EXTRA_MODULES
    "GST_",  # GST_PLUGIN_PATH
    "QT_",  # QT_PLUGIN_PATH
    "KRB5",
    "MPL",  # MPLBACKEND=module://name: matplotlib imports that module
    "TCL",
    "TK_",
    "FONTCONFIG_",
)
_STEERING_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "PORT",
        "BROWSER",
        "ENV",
        "IFS",
        "CDPATH",
        "SHELL",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "MANPAGER",
        "ZDOTDIR",
        "TERMINFO",
        "TERMINFO_DIRS",
        "LOCPATH",
        "NLSPATH",
        "TZDIR",
        "HOSTALIASES",
        "RES_OPTIONS",
        "LOCALDOMAIN",
        "NETRC",
        "SSLKEYLOGFILE",
        "KUBECONFIG",
        "TMPDIR",
        "TMP",
        "TEMP",
        "TEMPDIR",
        "PERLLIB",
        "PERLIO",
        "RUBYOPT",
        "RUBYLIB",
        "NODE_OPTIONS",
        "NODE_PATH",
        "NODE_EXTRA_CA_CERTS",
        "JAVA_TOOL_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "_JAVA_OPTIONS",
        "LESS",
        "LESSOPEN",
        "LESSCLOSE",
        "LESSKEY",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "WEB_CONCURRENCY",  # uvicorn's CLI: worker processes
        "FORWARDED_ALLOW_IPS",  # uvicorn: whose X-Forwarded-* headers to believe
        "FASTAPI_OTEL_AUTO_CONFIGURE",
        "ENV_README_PATH",  # openenv's web page shows that file
        "OPENENV_ENV_FILE",  # openenv loads that file's variables
    }
)
# Names the Hub, openenv and Spaces give a meaning to (tokens, caches, endpoints): taken when declared.
_DECLARED_ONLY_PREFIXES = ("HF_", "HUGGING_FACE_", "HUGGINGFACE_", "OPENENV_", "SPACE_", "OAUTH_", "OPENID_")
_PLAIN_NAMES = frozenset({"OPENENV_MODE"})  # openenv's, checked by the launch options
# A locale or a time zone by name: C.UTF-8, en_US.UTF-8@euro, fr:en, Europe/Paris, :UTC, EST5EDT.
_LOCALE = re.compile(r"^[A-Za-z0-9_.@:+-]{1,64}$")
_ZONE = re.compile(r"^:?[A-Za-z0-9_+-]{1,32}(/[A-Za-z0-9_+-]{1,32}){0,3}$")


def _steers(name: str) -> bool:
    upper = name.upper()
    return upper in _STEERING_NAMES or upper.startswith(_STEERING_PREFIXES) or upper.endswith("_PROXY")


def _names_a_file(name: str, value: str) -> bool:
    """A locale or time zone variable whose value is a path, which the C library would read as a file."""
    upper = name.upper()
    if upper in ("LANG", "LANGUAGE") or upper.startswith("LC_"):
        return not _LOCALE.match(value) or ".." in value
    if upper == "TZ":
        return not _ZONE.match(value) or ".." in value
    return False


def _reserved(name: str) -> bool:
    upper = name.upper()
    return upper not in _PLAIN_NAMES and upper.startswith(_DECLARED_ONLY_PREFIXES)


def ensure_plain_variables(variables: Mapping[str, str], declared: Collection[str], environment_id: str) -> None:
    """Refuse, naming them, the variables a process server of an untrusted caller may not be given."""
    steering = sorted(name for name in variables if _steers(name))
    files = sorted(name for name in variables if not _steers(name) and _names_a_file(name, variables[name]))
    undeclared = sorted(name for name in variables if not _steers(name) and _reserved(name) and name not in declared)
    problems = []
    if steering:
        problems.append(
            f"{', '.join(steering)}: read by Python, the dynamic loader, a shell, uvicorn or another tool the "
            "server runs, they could make it run code or read files that are not the environment's; leave them "
            "out, or launch with the docker backend, where they reach only the container"
        )
    if files:
        problems.append(
            f"{', '.join(files)}: a locale or time zone is given by name (C.UTF-8, Europe/Paris), not as a path"
        )
    if undeclared:
        listed = ", ".join(sorted(declared)) or "none"
        problems.append(
            f"{', '.join(undeclared)}: names the Hub, openenv and Spaces give a meaning to are taken only when the "
            f"environment declares them, and {environment_id} declares {listed}; add them to `variables` in its "
            "openenv.yaml or README card, or leave them out"
        )
    if problems:
        raise InvalidInputError(
            "with sign-in on, only the admin sets these variables on a process server: " + "; ".join(problems)
        )
