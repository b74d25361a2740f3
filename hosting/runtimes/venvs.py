"""Virtualenvs for environment folders whose requirements envhub's own interpreter does not meet.

Each is cached by the hash of the folder's requirements (and of envhub's stack), and layered
over envhub's installed packages: a `.pth` file in its site-packages names envhub's, so the
environment sees openenv, uvicorn and the rest as envhub runs them, and pip installs only
what is missing or pinned otherwise. Packages the virtualenv installs come first on its
path, so a different version of a shared package is that environment's alone. An
environment whose requirements list only its own extras (trusting a base image for
openenv and uvicorn, as the official Dockerfiles do) therefore still starts.
"""

import hashlib
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import threading
import tomllib
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import BinaryIO

from packaging.requirements import InvalidRequirement, Requirement

from core.errors import LaunchError
from hosting.runtimes.base import Report
from hosting.runtimes.logs import log_tail

__all__ = ["LAYER_FILE", "Virtualenvs", "requirements_of", "unmet"]

LAYER_FILE = "envhub-layer.pth"  # in a virtualenv's site-packages: the folders of envhub's own packages
_READY = ".ready"
# Installing runs the requirements' own code (setup.py, build backends), and a Hub Space's requirements are
# anyone's: pip sees none of envhub's settings or secrets.
_SETTINGS = ("ENVHUB_", "HF_", "HUGGING_FACE_", "OAUTH_", "OPENID_")
_SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|CREDENTIAL", re.IGNORECASE)


def requirements_of(folder: Path) -> list[str]:
    """The folder's own requirements: server/requirements.txt, requirements.txt, or pyproject.toml."""
    for candidate in (folder / "server" / "requirements.txt", folder / "requirements.txt"):
        if candidate.is_file():
            lines = (line.split("#", 1)[0].strip() for line in candidate.read_text().splitlines())
            return [line for line in lines if line and not line.startswith("-")]
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        try:
            dependencies = tomllib.loads(pyproject.read_text()).get("project", {}).get("dependencies", [])
        except tomllib.TOMLDecodeError as exc:
            raise LaunchError(f"{pyproject} is not valid TOML: {exc}") from exc
        return [d for d in dependencies if isinstance(d, str)]
    return []


def unmet(requirements: list[str]) -> list[str]:
    """Requirements the running interpreter does not satisfy (direct ones only, by version)."""
    missing = []
    for line in requirements:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            missing.append(line)  # let pip say what is wrong with it
            continue
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        if requirement.url:
            missing.append(line)
            continue
        try:
            installed = version(requirement.name)
        except PackageNotFoundError:
            missing.append(line)
            continue
        if not requirement.specifier.contains(installed, prereleases=True):
            missing.append(line)
    return missing


def envhub_site_packages() -> list[str]:
    """The folders envhub's own packages are installed in (its virtualenv's, and the system's when it sees them)."""
    return [folder for folder in site.getsitepackages() if Path(folder).is_dir()]


def _install_environment() -> dict[str, str]:
    """envhub's environment without its settings and secrets (pip's own, PIP_*, stay)."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(_SETTINGS) and (name.startswith("PIP_") or not _SECRET.search(name))
    }


class Virtualenvs:
    """The cached virtualenvs under one folder; each is made once, however many launches ask for it at once."""

    def __init__(self, root: Path, *, install_timeout_s: float = 900) -> None:
        self.root = root.resolve()  # servers run in their own folders: a relative path would point elsewhere
        self.install_timeout_s = install_timeout_s
        self._lock = threading.Lock()
        self._installing: dict[str, threading.Lock] = {}

    def interpreter(self, folder: Path, log_path: Path, report: Report, extra: Sequence[str] = ()) -> str:
        """The Python to serve the folder with: envhub's own when it meets the requirements (the folder's, and the
        extra ones its Dockerfile installs), else a virtualenv's."""
        requirements = list(dict.fromkeys([*requirements_of(folder), *extra]))
        missing = unmet(requirements)
        if not missing:
            return sys.executable
        stack = "\n".join([sys.version, *envhub_site_packages()])
        digest = hashlib.sha256(("\n".join(sorted(requirements)) + "\0" + stack).encode()).hexdigest()[:16]
        venv = self.root / digest
        with self._lock:
            installing = self._installing.setdefault(digest, threading.Lock())
        with installing:
            if not (venv / _READY).is_file():
                report(
                    f"installing {len(missing)} requirements ({', '.join(missing[:5])}) into a virtualenv "
                    "layered on envhub's packages; the first launch takes a while, later ones reuse it"
                )
                self._make(venv, requirements, log_path)
        return str(venv / "bin" / "python")

    def _make(self, venv: Path, requirements: list[str], log_path: Path) -> None:
        shutil.rmtree(venv, ignore_errors=True)  # what a failed or interrupted attempt left
        log_path.parent.mkdir(parents=True, exist_ok=True)
        python = venv / "bin" / "python"
        with log_path.open("ab") as log:
            # No pip of its own: envhub's, seen through the layer, installs into it.
            self._run([sys.executable, "-m", "venv", "--without-pip", str(venv)], log, log_path)
            layer = Path(sysconfig.get_path("purelib", "venv", vars={"base": str(venv), "platbase": str(venv)}))
            (layer / LAYER_FILE).write_text("".join(f"{folder}\n" for folder in envhub_site_packages()))
            pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
            self._run([*pip, *requirements], log, log_path)
        (venv / _READY).touch()

    def _run(self, argv: list[str], log: BinaryIO, log_path: Path) -> None:
        try:
            done = subprocess.run(
                argv, stdout=log, stderr=subprocess.STDOUT, timeout=self.install_timeout_s, env=_install_environment()
            )
        except subprocess.TimeoutExpired as exc:
            late = f"installing requirements took over {self.install_timeout_s:g} s"
            raise LaunchError(late, code="requirements_timeout") from exc
        if done.returncode != 0:
            log.flush()
            errors = [line for line in log_tail(log_path, 30) if "ERROR" in line] or log_tail(log_path, 8)
            failed = "installing the environment's requirements failed: " + " ".join(errors)
            raise LaunchError(failed, code="requirements_failed")
