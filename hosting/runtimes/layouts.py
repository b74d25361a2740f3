"""Finding the app in an environment's folder or Space repo: what uvicorn serves, from where, on which import path.

The layouts seen in real Spaces, tried in order:

1. openenv.yaml's `app` (e.g. `server.app:app`), served from the repo's root;
2. `server/app.py`, the layout `openenv init` writes: the root is often a package (`__init__.py`,
   `models.py`) whose server imports it relatively (`from ..models import X`) or by name
   (`from <name>.models import X`), so the root is importable under that name too;
3. `envs/<name>/server/app.py` or `src/envs/<name>/server/app.py`, the OpenEnv monorepo's shape,
   served as `envs.<name>.server.app:app` with the folder holding `envs` on the import path;
4. the Dockerfile's command (`uvicorn pkg.mod:app`, `python -m uvicorn ...`, `sh -c "cd ... && ..."`),
   its WORKDIR and ENV PYTHONPATH mapped back to the repo through its COPY lines.

The same rules read a downloaded folder (FolderFiles) and, before anything is downloaded, a repo's
file listing and a few small files (ListedFiles).
"""

import posixpath
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from catalog.models import EnvironmentDetail
from hosting.runtimes.dockerfiles import parse_dockerfile, served

__all__ = [
    "SMALL_FILE",
    "FolderFiles",
    "Layout",
    "ListedFiles",
    "RepoFiles",
    "find_layout",
    "root_names",
    "template_layout",
]

SMALL_FILE = 256 * 1024  # the most of a file (Dockerfile, openenv.yaml, an app module) read to find the app
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
_REQUIREMENTS = ("server/requirements.txt", "requirements.txt", "pyproject.toml")  # what venvs.py reads


class RepoFiles(Protocol):
    """A repo's files, as far as finding its app needs them; paths are relative, with `/`, "" the root."""

    def is_file(self, path: str) -> bool: ...

    def is_folder(self, path: str) -> bool: ...

    def folders(self, path: str) -> list[str]:
        """The names of the folder's sub-folders, sorted."""
        ...

    def read(self, path: str) -> str | None:
        """A small file's text; None when it is not there or is too big to be a manifest or a module."""
        ...


class FolderFiles:
    """The files of a folder on disk."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _inside(self, path: str) -> Path | None:
        """The path under the folder, or None when it (or a link on the way) leads out of it."""
        found = (self.root / path).resolve()
        return found if found == self.root or self.root in found.parents else None

    def is_file(self, path: str) -> bool:
        found = self._inside(path)
        return found is not None and found.is_file()

    def is_folder(self, path: str) -> bool:
        found = self._inside(path)
        return found is not None and found.is_dir()

    def folders(self, path: str) -> list[str]:
        folder = self._inside(path)
        if folder is None or not folder.is_dir():
            return []
        return sorted(
            child.name for child in folder.iterdir() if child.is_dir() and self._inside(f"{path}/{child.name}")
        )

    def read(self, path: str) -> str | None:
        file = self._inside(path)
        if file is None or not file.is_file() or file.stat().st_size > SMALL_FILE:
            return None
        return file.read_text(errors="replace")


class ListedFiles:
    """A repo known by its file listing, reading the few files it needs through `read` (a download, say)."""

    def __init__(self, paths: Iterable[str], read: Callable[[str], str | None]) -> None:
        self.paths = frozenset(paths)
        self._folders = {posixpath.dirname(path) for path in self.paths}
        for folder in list(self._folders):
            while folder:
                folder = posixpath.dirname(folder)
                self._folders.add(folder)
        self._read = read

    def is_file(self, path: str) -> bool:
        return path in self.paths

    def is_folder(self, path: str) -> bool:
        return path in self._folders

    def folders(self, path: str) -> list[str]:
        return sorted(posixpath.basename(f) for f in self._folders if f and posixpath.dirname(f) == path)

    def read(self, path: str) -> str | None:
        return self._read(path) if path in self.paths else None


@dataclass(frozen=True)
class Layout:
    """How to serve a repo: the app and, relative to the repo's root, where it runs and what it imports."""

    app: str  # uvicorn's module:attribute
    found_in: str  # the layout that found it, for the server's log
    cwd: str = ""  # the server's working folder
    path: tuple[str, ...] = ()  # more folders on its import path, in order
    package: str | None = None  # the name the root is imported by (the runtime links it under that name)
    requirements: str = ""  # the folder whose requirements the server needs (server/requirements.txt, ...)


def root_names(environment: EnvironmentDetail) -> list[str]:
    """What an environment's root may be imported by when it is a package: its folder's name, or its Space's."""
    return [Path(environment.path).name if environment.path else environment.id.rpartition("/")[2]]


def find_layout(files: RepoFiles, names: Sequence[str]) -> Layout | None:
    """The app, by the first layout that finds one; None when none does.

    names: what the root may be imported by when it is a package (its folder's or repo's name), in order;
    openenv.yaml's name comes after them.
    """
    manifest = _manifest(files)
    spelled = [*names, str(manifest.get("name") or "")]
    # A Space called count-env is imported as count_env.
    candidates = list(dict.fromkeys(n for name in spelled if (n := re.sub(r"[-.]", "_", name)).isidentifier()))
    app = manifest.get("app")
    if isinstance(app, str) and _TARGET.fullmatch(app) and _module_file(files, "", app) is not None:
        return _rooted(files, app, "openenv.yaml's app", candidates)
    if files.is_file("server/app.py"):
        return _rooted(files, "server.app:app", "server/app.py", candidates)
    return _in_envs(files, candidates) or _by_dockerfile(files)


def template_layout(folder: Path, names: Sequence[str]) -> Layout:
    """A template's layout; one none finds is served as openenv.yaml says (or server.app:app), to fail with
    uvicorn's own message."""
    found = find_layout(FolderFiles(folder), names)
    if found is not None:
        return found
    app = _manifest(FolderFiles(folder)).get("app")
    return Layout(app if isinstance(app, str) else "server.app:app", "none found: openenv.yaml's app or the default")


def _manifest(files: RepoFiles) -> dict[str, Any]:
    text = files.read("openenv.yaml")
    try:
        loaded = yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _module_file(files: RepoFiles, folder: str, app: str) -> str | None:
    """The file of the app's module under folder, if it is there."""
    module = posixpath.join(folder, *app.partition(":")[0].split("."))
    return next((path for path in (f"{module}.py", f"{module}/__init__.py") if files.is_file(path)), None)


def _rooted(files: RepoFiles, app: str, found_in: str, candidates: list[str]) -> Layout:
    """An app served from the root; under the root's package name when the root is a package."""
    if not files.is_file("__init__.py") or not candidates:
        return Layout(app, found_in)
    # The name its code imports itself by, when the app module says (`from count.models import ...`).
    code = files.read(_module_file(files, "", app) or "") or ""
    package = next((name for name in candidates if re.search(rf"^\s*(from|import)\s+{name}\b", code, re.M)), None)
    package = package or candidates[0]
    return Layout(f"{package}.{app}", found_in, package=package)


def _in_envs(files: RepoFiles, candidates: list[str]) -> Layout | None:
    """One environment of an envs/ tree: the only one, or the one named like the repo (count, count_env)."""
    wanted = {variant for name in candidates for variant in (name, f"{name}_env", name.removesuffix("_env"))}
    for envs in ("envs", "src/envs"):
        found = [name for name in files.folders(envs) if files.is_file(f"{envs}/{name}/server/app.py")]
        named = [name for name in found if name in wanted]
        chosen = found[0] if len(found) == 1 else (named[0] if named else None)
        if chosen is not None:
            root = posixpath.dirname(envs)
            return Layout(
                f"envs.{chosen}.server.app:app",
                f"{envs}/{chosen}/server/app.py",
                path=(root,) if root else (),
                requirements=f"{envs}/{chosen}",
            )
    return None


def _by_dockerfile(files: RepoFiles) -> Layout | None:
    text = files.read("Dockerfile")
    if text is None:
        return None
    dockerfile = parse_dockerfile(text)
    command = served(dockerfile)
    if command is None:
        return None
    # A working folder no COPY explains is the repo's root, as `COPY . .` makes it.
    cwd = dockerfile.copied_from(command.cwd, files.is_folder) or ""
    mapped = (dockerfile.copied_from(entry, files.is_folder) for entry in dockerfile.pythonpath)
    first = dockerfile.copied_from(command.app_dir, files.is_folder) if command.app_dir else None
    path = list(dict.fromkeys(entry for entry in [first, cwd, *mapped] if entry is not None))
    module = next((found for entry in path if (found := _module_file(files, entry, command.app))), None)
    if module is None:
        return None
    if command.guessed and not re.search(r"^app\s*(:[^=\n]*)?=", files.read(module) or "", re.M):
        return None  # `python -m module` of a module without a module-level `app`
    requirements = cwd if any(files.is_file(posixpath.join(cwd, name)) for name in _REQUIREMENTS) else ""
    return Layout(
        command.app,
        "the Dockerfile's command",
        cwd=cwd,
        path=tuple(entry for entry in path if entry != cwd),
        requirements=requirements,
    )
