"""What a Space's Dockerfile says about running it without Docker: its base images, the system packages
and Python packages it installs, and the command, working folder and import path its server starts with.

Only what the process backend needs is read, leniently: an instruction this module does not
understand is skipped, never an error. Paths are the image's; `copied_from` maps them back to the repo.
"""

import json
import posixpath
import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace

__all__ = ["Dockerfile", "Served", "needs_docker", "parse_dockerfile", "python_of", "served"]

_VARIABLE = re.compile(r"\$(?:\{(\w+)(?::?[-+][^}]*)?\}|(\w+))")
# Package managers and the verb that installs with them: `apt-get install -y git`, `apk add --no-cache curl`.
_INSTALLERS = {"apt-get": "install", "apt": "install", "apk": "add", "yum": "install", "dnf": "install",
               "microdnf": "install", "zypper": "install"}  # fmt: skip
_SHELL_SPLIT = re.compile(r"&&|\|\||;|\|")


@dataclass
class Dockerfile:
    bases: list[str] = field(default_factory=list)  # the images its stages start FROM (ARGs filled in)
    system_packages: list[str] = field(default_factory=list)  # what its RUN lines install with apt-get, apk, ...
    python_packages: list[str] = field(default_factory=list)  # what they name to `pip install` (not files)
    command: list[str] = field(default_factory=list)  # the last stage's ENTRYPOINT and CMD, as one argv
    workdir: str = "/"  # the last stage's WORKDIR
    pythonpath: list[str] = field(default_factory=list)  # the last stage's ENV PYTHONPATH entries
    copies: list[tuple[str, str]] = field(default_factory=list)  # (repo path, image path) of COPY/ADD from the repo

    def copied_from(self, image_path: str, is_folder: Callable[[str], bool]) -> str | None:
        """The repo folder ("" for its root) an image folder holds, by the longest COPY of a folder into it;
        None when no COPY of a repo folder holds it."""
        image_path = posixpath.normpath(image_path)
        for source, target in sorted(self.copies, key=lambda copy: -len(copy[1])):
            if (image_path == target or image_path.startswith(target.rstrip("/") + "/")) and is_folder(source):
                inside = image_path[len(target) :].strip("/")
                return posixpath.join(source, inside).strip("/") if inside else source
        return None


@dataclass
class _Stage:
    """What a stage's server would start with; a later `FROM <stage>` goes on from it."""

    workdir: str = "/"
    pythonpath: list[str] = field(default_factory=list)
    entrypoint: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)


def parse_dockerfile(text: str) -> Dockerfile:
    found = Dockerfile()
    arguments: dict[str, str] = {}  # ARG defaults before the first FROM: what FROM lines may use
    variables: dict[str, str] = {}  # the current stage's ARG and ENV values
    named: dict[str, _Stage] = {}
    stage = _Stage()
    for keyword, rest in _instructions(text):
        if keyword == "ARG":
            name, _, default = rest.partition("=")
            (variables if found.bases else arguments).setdefault(name.strip(), _unquote(default.strip()))
        elif keyword == "FROM":
            words = rest.split()
            image = _expand(next((w for w in words if not w.startswith("--")), ""), arguments, unknown=None)
            earlier = named.get(image.lower())
            if earlier is None:
                found.bases.append(image)
            stage = replace(earlier, pythonpath=list(earlier.pythonpath)) if earlier is not None else _Stage()
            if len(words) >= 3 and words[-2].upper() == "AS":
                named[words[-1].lower()] = stage
            variables = dict(arguments)
        elif keyword == "WORKDIR":
            stage.workdir = posixpath.normpath(posixpath.join(stage.workdir, _expand(_unquote(rest), variables)))
        elif keyword == "ENV":
            for name, value in _assignments(rest):
                variables[name] = _expand(value, variables)
                if name == "PYTHONPATH":
                    stage.pythonpath = [entry for entry in variables[name].split(":") if entry]
        elif keyword in ("COPY", "ADD"):
            found.copies.extend(_copies(rest, stage.workdir, variables))
        elif keyword == "RUN":
            found.system_packages.extend(_system_packages(rest))
            found.python_packages.extend(_python_packages(_expand(rest, variables, unknown=None)))
        elif keyword == "CMD":
            stage.command = _argv(rest)
        elif keyword == "ENTRYPOINT":
            stage.entrypoint, stage.command = _argv(rest), []  # a new ENTRYPOINT drops the CMD it inherited
    found.workdir, found.pythonpath = stage.workdir, stage.pythonpath
    found.command = [*stage.entrypoint, *stage.command]
    return found


def _instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, the rest) of each instruction, continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        whole = (pending + stripped).strip()
        pending = ""
        if whole:
            keyword, _, rest = whole.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def _expand(value: str, variables: dict[str, str], *, unknown: str | None = "") -> str:
    """$NAME and ${NAME} filled in; one without a value becomes `unknown` (None: left as it is)."""

    def value_of(match: re.Match[str]) -> str:
        known = variables.get(match.group(1) or match.group(2))
        return known if known is not None else (match.group(0) if unknown is None else unknown)

    return _VARIABLE.sub(value_of, value)


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _assignments(rest: str) -> list[tuple[str, str]]:
    """ENV's `A=1 B="two words"` or its old `A one value` form."""
    words = _words(rest)
    if words and "=" not in words[0]:
        return [(words[0], " ".join(words[1:]))]
    return [(name, value) for name, _, value in (word.partition("=") for word in words)]


def _argv(rest: str) -> list[str]:
    """An exec-form (JSON array) or shell-form command as argv; a shell form runs under `sh -c`."""
    if rest.startswith("["):
        try:
            argv = json.loads(rest)
        except ValueError:
            return []
        return [str(word) for word in argv] if isinstance(argv, list) else []
    return ["/bin/sh", "-c", rest]


def _copies(rest: str, workdir: str, variables: dict[str, str]) -> list[tuple[str, str]]:
    words = _argv(rest) if rest.startswith("[") else _words(rest)
    if any(word.startswith("--from") for word in words):
        return []  # from another stage or image, not from the repo
    paths = [_expand(word, variables) for word in words if not word.startswith("--")]
    if len(paths) < 2:
        return []
    *sources, target = paths
    target = posixpath.normpath(posixpath.join(workdir, target))
    # Sources are the repo's, relative to its root however written ("." and "/" are the root itself); one that
    # climbs out of it copies nothing (Docker refuses a path outside the build context).
    sources = [posixpath.normpath(source).strip("/") for source in sources if "://" not in source]
    return [("" if source == "." else source, target) for source in sources if not _climbs_out(source)]


def _climbs_out(path: str) -> bool:
    return path == ".." or path.startswith("../")


def _system_packages(script: str) -> list[str]:
    """What a RUN line installs with a system package manager (`apt-get install -y git` gives git)."""
    packages: list[str] = []
    for part in _SHELL_SPLIT.split(script):
        words = [word for word in _words(part) if word != "sudo"]
        if not words or posixpath.basename(words[0]) not in _INSTALLERS:
            continue
        verb = _INSTALLERS[posixpath.basename(words[0])]
        if verb in words:
            after = words[words.index(verb) + 1 :]
            packages.extend(word.split("=")[0] for word in after if not word.startswith(("-", ".")))
    return packages


# pip install's options that take a value: it is not a package.
_PIP_VALUED = {"-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url",
               "--extra-index-url", "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--platform",
               "--python-version", "--implementation", "--abi", "--upgrade-strategy", "--trusted-host",
               "--progress-bar", "--src", "--python", "-p", "--only-binary", "--no-binary", "--config-settings", "-C",
               "--cache-dir"}  # fmt: skip


def _python_packages(script: str) -> list[str]:
    """The packages a RUN line names to pip (`pip install --no-cache-dir openenv-core==0.2 'numpy<2'`, also through
    `python -m pip` or `uv pip`); requirement files and local folders are not packages (the layout reads those)."""
    packages: list[str] = []
    for part in _SHELL_SPLIT.split(script):
        words = _words(part)
        for start in range(len(words) - 1):
            program = posixpath.basename(words[start])
            pip = program in ("pip", "pip3") or (program == "uv" and words[start + 1] == "pip")
            if program.startswith("python") and words[start + 1 : start + 3] == ["-m", "pip"]:
                pip, start = True, start + 1
            if pip:
                after = words[start + 1 :]
                if after and after[0] == "pip":
                    after = after[1:]
                if after[:1] == ["install"]:
                    packages.extend(_named_packages(after[1:]))
                break
    return packages


def _named_packages(arguments: list[str]) -> list[str]:
    packages: list[str] = []
    skip = False
    for word in arguments:
        if skip:
            skip = False
        elif word.startswith("-"):
            skip = word in _PIP_VALUED
        elif not (word.startswith((".", "/", "$")) or "://" in word or word.endswith((".whl", ".tar.gz", ".zip"))):
            packages.append(word)
    return packages


@dataclass(frozen=True)
class Served:
    """The ASGI app a Dockerfile's command serves, and where it starts."""

    app: str  # uvicorn's module:attribute
    cwd: str  # the image folder the command runs in
    app_dir: str | None = None  # uvicorn's --app-dir (gunicorn's --chdir): first on the import path
    guessed: bool = False  # `python -m module` runs the module: its `app`, when it has one, is a guess


def served(dockerfile: Dockerfile) -> Served | None:
    """What the Dockerfile's command serves: uvicorn, gunicorn or hypercorn given module:app (also through
    `python -m`, `sh -c "cd ... && ..."`, `exec` or `uv run`), or a `python -m module` / `python file.py`."""
    argv, cwd = dockerfile.command, dockerfile.workdir
    if len(argv) >= 3 and posixpath.basename(argv[0]) in ("sh", "bash") and "-c" in argv[:-1]:
        for part in _SHELL_SPLIT.split(argv[argv.index("-c") + 1]):
            words = _words(part)
            if len(words) == 2 and words[0] == "cd":
                cwd = posixpath.normpath(posixpath.join(cwd, words[1]))
            elif (found := _server(words, cwd)) is not None:
                return found
        return None
    return _server(argv, cwd)


_SERVERS = ("uvicorn", "gunicorn", "hypercorn")
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def _server(words: list[str], cwd: str) -> Served | None:
    while words and (words[0] == "exec" or re.fullmatch(r"\w+=.*", words[0])):
        words = words[1:]  # `exec uvicorn ...`, `PORT=8000 uvicorn ...`
    if words[:2] == ["uv", "run"]:
        words = [word for word in words[2:] if not word.startswith("-")]
    if not words:
        return None
    program = posixpath.basename(words[0])
    if program.startswith("python") and len(words) >= 3 and words[1] == "-m":
        if words[2] not in _SERVERS:
            return Served(f"{words[2]}:app", cwd, guessed=True)
        program, words = words[2], words[2:]
    elif program.startswith("python") and len(words) >= 2 and words[1].endswith(".py"):
        module = posixpath.normpath(posixpath.join(cwd, words[1]))[:-3]
        # A script has its own folder first on its import path.
        return Served(f"{posixpath.basename(module)}:app", cwd, posixpath.dirname(module), guessed=True)
    if program not in _SERVERS:
        return None
    app_dir = None
    options = iter(words[1:])
    for word in options:
        if word in ("--app-dir", "--chdir"):
            app_dir = posixpath.join(cwd, next(options, "."))
        elif word.startswith(("--app-dir=", "--chdir=")):
            app_dir = posixpath.join(cwd, word.partition("=")[2])
        elif _TARGET.fullmatch(word):
            return Served(word, cwd, app_dir)
    return None


_PYTHON_TAG = re.compile(r"python:?(\d+\.\d+)")


def python_of(dockerfile: Dockerfile) -> str | None:
    """The Python version (3.12) the last stage's base image names, as python:3.12-slim does; None if none."""
    bases = dockerfile.bases[-1:]
    found = _PYTHON_TAG.search(bases[0].rpartition("/")[2]) if bases else None
    return found.group(1) if found else None


# System packages that need not be installed when they are here already: the command they bring, by package
# (git, curl and the like bring their own name). Certificates are here: envhub speaks https to the Hub.
_COMMAND_OF = {"build-essential": "gcc", "procps": "ps"}
_HERE = {"ca-certificates"}


def needs_docker(dockerfile: Dockerfile) -> str | None:
    """Why the Space cannot run as a local process, by its Dockerfile; None when it can, as far as it tells.

    Installing a tool this machine has already (git and curl, which `openenv init`'s Dockerfile installs
    to fetch dependencies) is no reason: the process backend uses the machine's own.
    """
    for image in dockerfile.bases:
        if "$" in image:
            return f"its Dockerfile builds FROM {image}, a build argument without a default"
        repository, _, tag = image.partition("@")[0].rpartition("/")[2].partition(":")
        if not ("python" in repository or "python" in tag or "openenv" in image.lower()):
            return f"its Dockerfile builds FROM {image}, not a Python or openenv base image"
    packages = [package for package in dict.fromkeys(dockerfile.system_packages) if package not in _HERE]
    missing = [package for package in packages if shutil.which(_COMMAND_OF.get(package, package)) is None]
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        return f"its Dockerfile installs system packages ({', '.join(missing[:5])}{more}) this machine may not have"
    return None
