"""What a Space's Dockerfile says about running it without Docker: its base images, the system packages
and Python packages it installs, and the command, working folder and import path its server starts with.

Instructions are read by dockerfile-parse (continuation lines, comments, `# escape=`, any whitespace after the
keyword); heredocs (`RUN <<EOF`), which it does not know, are read here, and so are build arguments and
variables with their defaults (`${VAR:-default}`, `${VAR:+word}`), as Docker fills them in. Only what the
process backend needs is read, leniently: an instruction this module does not understand is skipped, never an
error. Paths are the image's; `copied_from` maps them back to the repo.
"""

import io
import json
import posixpath
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from dockerfile_parse import DockerfileParser
from dockerfile_parse.constants import COMMENT_INSTRUCTION
from dockerfile_parse.util import WordSplitter

__all__ = ["Dockerfile", "Served", "needs_docker", "parse_dockerfile", "python_of", "served"]

# $NAME, ${NAME}, and ${NAME:-default} / ${NAME-default} / ${NAME:+word} / ${NAME+word}.
_VARIABLE = re.compile(r"\$(?:\{(\w+)(?:(:?[-+])([^}]*))?\}|(\w+))")
# A heredoc's opening (`<<EOF`, `<<-EOF`, `<<"EOF"`); its body runs from the next line to a line holding its word.
_HEREDOC = re.compile(r"<<(-?)([\"']?)([A-Za-z_]\w*)\2")
_SHELLS = {"sh", "bash", "ash", "dash", "zsh"}
# Package managers and the verb that installs with them: `apt-get install -y git`, `apk add --no-cache curl`.
_INSTALLERS = {"apt-get": "install", "apt": "install", "apk": "add", "yum": "install", "dnf": "install",
               "microdnf": "install", "zypper": "install"}  # fmt: skip
_SHELL_SPLIT = re.compile(r"&&|\|\||;|\||\n")


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


@dataclass(frozen=True)
class _Instruction:
    keyword: str  # upper case
    value: str  # the rest of it, continuation lines joined
    heredocs: tuple[str, ...] = ()  # the bodies of the heredocs it opens, in order


def parse_dockerfile(text: str, build_args: Mapping[str, str] | None = None) -> Dockerfile:
    """What the Dockerfile says; `build_args` are given to the build (`--build-arg`), over its ARG defaults."""
    given = build_args or {}
    found = Dockerfile()
    arguments: dict[str, str] = {}  # ARG defaults before the first FROM: what FROM lines may use
    variables: dict[str, str] = {}  # the current stage's ARG and ENV values
    named: dict[str, _Stage] = {}
    stage = _Stage()
    for instruction in _instructions(text):
        keyword, rest = instruction.keyword, instruction.value
        if keyword == "ARG":
            for name, default in _arguments(rest, variables if found.bases else arguments):
                # In a stage, an ARG without a default takes the one given before the first FROM.
                value = default if default is not None or not found.bases else arguments.get(name)
                value = given.get(name, value) if not found.bases else value
                if value is not None:
                    (variables if found.bases else arguments)[name] = value
        elif keyword == "FROM":
            words = [word for word in _words(rest) if not word.startswith("--")]
            image = _expand(words[0], arguments, unknown=None) if words else ""
            earlier = named.get(image.lower())
            if earlier is None:
                found.bases.append(image)
            stage = replace(earlier, pythonpath=list(earlier.pythonpath)) if earlier is not None else _Stage()
            if len(words) >= 3 and words[-2].upper() == "AS":
                named[words[-1].lower()] = stage
            variables = {}  # a stage sees a global ARG only once it names it again
        elif keyword == "WORKDIR":
            where = _dequote(_expand(rest, variables))
            stage.workdir = posixpath.normpath(posixpath.join(stage.workdir, where))
        elif keyword == "ENV":
            for name, value in _assignments(rest, variables):
                variables[name] = value
                if name == "PYTHONPATH":
                    stage.pythonpath = [entry for entry in value.split(":") if entry]
        elif keyword in ("COPY", "ADD"):
            found.copies.extend(_copies(rest, stage.workdir, variables))
        elif keyword == "RUN":
            for script in _scripts(instruction):
                found.system_packages.extend(_system_packages(_expand(script, variables, unknown=None)))
                found.python_packages.extend(_python_packages(_expand(script, variables, unknown=None)))
        elif keyword == "CMD":
            stage.command = _argv(rest)
        elif keyword == "ENTRYPOINT":
            stage.entrypoint, stage.command = _argv(rest), []  # a new ENTRYPOINT drops the CMD it inherited
    found.workdir, found.pythonpath = stage.workdir, stage.pythonpath
    found.command = [*stage.entrypoint, *stage.command]
    return found


def _instructions(text: str) -> Iterator[_Instruction]:
    """The Dockerfile's instructions, comments dropped, each with the bodies of its heredocs."""
    lines = text.splitlines(keepends=True)
    # Docker skips a blank line inside a continuation, where dockerfile-parse would end the instruction; as a
    # comment it is skipped by both (and, as Docker has it, ends where parser directives may stand).
    readable = "".join(line if line.strip() else "#\n" for line in lines)
    parser = DockerfileParser(fileobj=io.StringIO(readable))
    body_ends = -1  # the last line of the heredocs read so far: what dockerfile-parse made of it is not Dockerfile
    for entry in parser.structure:
        if entry["instruction"] == COMMENT_INSTRUCTION or entry["startline"] <= body_ends:
            continue
        value: str = entry["value"].strip()
        bodies = []
        body_ends = entry["endline"]
        for heredoc in _HEREDOC.finditer(value):
            tabs_stripped, word = heredoc.group(1) == "-", heredoc.group(3)
            body = []
            for line in lines[body_ends + 1 :]:
                body_ends += 1
                line = line.rstrip("\r\n").lstrip("\t") if tabs_stripped else line.rstrip("\r\n")
                if line == word:
                    break
                body.append(line)
            bodies.append("\n".join(body))
        yield _Instruction(entry["instruction"], value, tuple(bodies))


def _scripts(run: _Instruction) -> list[str]:
    """The shell scripts a RUN runs: its line and, when it is a script (`RUN <<EOF`, `RUN bash <<EOF`), each
    heredoc's body (a heredoc fed to `python` is no shell script)."""
    words = _words(run.value.partition("<<")[0])
    runs_scripts = not words or posixpath.basename(words[0]) in _SHELLS
    bodies = [body.replace("\\\n", " ") for body in run.heredocs] if runs_scripts else []
    return [_HEREDOC.sub("", run.value), *bodies]


def _expand(value: str, variables: dict[str, str], *, unknown: str | None = "") -> str:
    """$NAME and ${NAME} filled in, with ${NAME:-default} and ${NAME:+word} as Docker reads them; a plain
    reference to a variable without a value becomes `unknown` (None: left as it is)."""

    def value_of(match: re.Match[str]) -> str:
        name, modifier, word = match.group(1) or match.group(4), match.group(2), match.group(3)
        known = variables.get(name)
        if modifier is not None:
            is_set = bool(known) if modifier.startswith(":") else known is not None
            if modifier.endswith("-"):
                return known if is_set and known is not None else _expand(word, variables, unknown=unknown)
            return _expand(word, variables, unknown=unknown) if is_set else ""
        return known if known is not None else (match.group(0) if unknown is None else unknown)

    return _VARIABLE.sub(value_of, value)


def _dequote(value: str) -> str:
    return WordSplitter(value).dequote()


def _words(text: str, *, dequote: bool = True) -> list[str]:
    """Words split as Docker splits them: at any whitespace outside quotes (with `dequote`, quotes and escapes
    consumed)."""
    return [word for word in WordSplitter(text).split(dequote=dequote) if word is not None]


def _arguments(rest: str, known: dict[str, str]) -> list[tuple[str, str | None]]:
    """ARG's names, each with its default (None: it has none): `ARG A=1 B="two words" C`."""
    named = []
    for word in _words(rest, dequote=False):
        name, equals, default = word.partition("=")
        named.append((_dequote(name), _dequote(_expand(default, known)) if equals else None))
    return named


def _assignments(rest: str, known: dict[str, str]) -> list[tuple[str, str]]:
    """ENV's `A=1 B="two words"` or its old `A one value` form; values are filled in from the variables before
    the instruction (as Docker does: `ENV A=2 B=$A` gives B the A of before)."""
    words = _words(rest, dequote=False)
    if words and "=" not in words[0]:
        value = rest[rest.index(words[0]) + len(words[0]) :].strip()
        return [(_dequote(words[0]), _dequote(_expand(value, known)))]
    pairs = (word.partition("=") for word in words)
    return [(_dequote(name), _dequote(_expand(value, known))) for name, _, value in pairs]


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
    # climbs out of it copies nothing (Docker refuses a path outside the build context), and a heredoc
    # (`COPY <<EOF /app/x`) or a URL is no file of the repo.
    sources = [posixpath.normpath(source).strip("/") for source in sources if not _elsewhere(source)]
    return [("" if source == "." else source, target) for source in sources if not _climbs_out(source)]


def _elsewhere(source: str) -> bool:
    return "://" in source or source.startswith("<<")


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
