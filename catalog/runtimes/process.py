"""The process backend: an environment folder served by uvicorn as a local subprocess.

The folder is any OpenEnv Space layout. When its own requirements are not met by
envhub's interpreter, they go into a virtualenv cached by the hash of those
requirements, layered over envhub's packages so that only what differs is installed.
"""

import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from catalog.errors import InvalidInputError
from catalog.models import Backend, EnvironmentDetail
from catalog.runtimes import Launched, LaunchError, LaunchSpec, Report, log_tail, wait_healthy

ENDPOINT_VARIABLE = "ENVHUB_ENDPOINT"  # set in each server's environment, to recognise it later
_PASSED_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SSL_CERT_FILE", "PIP_INDEX_URL")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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


def _package_name(folder: Path, manifest: dict[str, Any] | None) -> str | None:
    """The name the folder's code may import itself by, when it is a package."""
    if not (folder / "__init__.py").is_file():
        return None
    for name in (folder.name, str((manifest or {}).get("name", ""))):
        if name.isidentifier():
            return name
    return None


class ProcessRuntime:
    name = Backend.PROCESS

    def __init__(self, work_dir: Path, *, ready_timeout_s: float = 60, install_timeout_s: float = 900) -> None:
        self.work_dir = work_dir
        self.ready_timeout_s = ready_timeout_s
        self.install_timeout_s = install_timeout_s
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()
        self._install_locks: dict[str, threading.Lock] = {}

    def check(
        self, environment: EnvironmentDetail, options: dict[str, Any], token: str | None = None
    ) -> dict[str, Any]:
        if not environment.path or not Path(environment.path).is_dir():
            raise InvalidInputError(
                f"the process backend runs local environment folders, and {environment.id} has none; "
                "launch it with the docker or space backend"
            )
        if options:
            raise InvalidInputError(f"the process backend takes no options, got {sorted(options)}")
        return {}

    def start(self, spec: LaunchSpec, report: Report) -> Launched:
        folder = Path(spec.environment.path or "")
        python = self._interpreter(folder, spec, report)
        manifest = spec.environment.manifest or {}
        app = str(manifest.get("app") or "server.app:app")
        package = _package_name(folder, manifest)
        shim = self.work_dir / "packages" / spec.endpoint_id
        pythonpath = [str(folder)]
        if package is not None:
            # The folder is importable under its package name, so both `from ..models import X`
            # (the app loaded as package.server.app) and `from package.models import X` work.
            shim.mkdir(parents=True, exist_ok=True)
            link = shim / package
            if not link.exists():
                link.symlink_to(folder.resolve(), target_is_directory=True)
            pythonpath.append(str(shim))
            app = f"{package}.{app}"
        port = free_port()
        env = {k: os.environ[k] for k in _PASSED_THROUGH if k in os.environ}
        env |= {"PYTHONPATH": os.pathsep.join(pythonpath), "PYTHONUNBUFFERED": "1", "PORT": str(port)}
        env |= spec.env | {ENDPOINT_VARIABLE: spec.endpoint_id}
        report(f"starting {app} on port {port}")
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        with spec.log_path.open("ab") as log:
            child = subprocess.Popen(
                [
                    python,
                    "-m",
                    "uvicorn",
                    app,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--ws-max-size",
                    "104857600",
                ],
                cwd=folder,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, stopped as a whole
            )
        with self._lock:
            self._children[spec.endpoint_id] = child
        handle = {"pid": child.pid, "port": port, "endpoint": spec.endpoint_id}
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(
                url,
                timeout_s=self.ready_timeout_s,
                alive=lambda: child.poll() is None,
                what=f"the server of {spec.environment.id}",
                log_path=spec.log_path,
            )
        except LaunchError:
            self.stop(handle)
            raise
        return Launched(url, handle)

    def _interpreter(self, folder: Path, spec: LaunchSpec, report: Report) -> str:
        requirements = requirements_of(folder)
        missing = unmet(requirements)
        if not missing:
            return sys.executable
        digest = hashlib.sha256("\n".join(sorted(requirements)).encode()).hexdigest()[:16]
        venv = self.work_dir / "venvs" / digest
        python = venv / "bin" / "python"
        with self._lock:
            install_lock = self._install_locks.setdefault(digest, threading.Lock())
        with install_lock:
            if (venv / ".ready").is_file():
                return str(python)
            report(
                f"installing {len(missing)} requirements ({', '.join(missing[:5])}) into a virtualenv; "
                "the first launch takes a while, later ones reuse it"
            )
            self._install(venv, requirements, spec.log_path)
        return str(python)

    def _install(self, venv: Path, requirements: list[str], log_path: Path) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        staging = venv.with_name(venv.name + ".partial")
        steps = [
            [sys.executable, "-m", "venv", "--system-site-packages", str(staging)],
            [str(staging / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", *requirements],
        ]
        with log_path.open("ab") as log:
            for argv in steps:
                try:
                    done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=self.install_timeout_s)
                except subprocess.TimeoutExpired as exc:
                    raise LaunchError(f"installing requirements took over {self.install_timeout_s:g} s") from exc
                if done.returncode != 0:
                    log.flush()
                    errors = [line for line in log_tail(log_path, 30) if "ERROR" in line] or log_tail(log_path, 8)
                    raise LaunchError("installing the environment's requirements failed: " + " ".join(errors))
        (staging / ".ready").touch()
        staging.rename(venv)

    def stop(self, handle: dict[str, Any]) -> None:
        endpoint = str(handle.get("endpoint", ""))
        with self._lock:
            child = self._children.pop(endpoint, None)
        pid = int(handle.get("pid", 0))
        if child is None and not self._is_ours(pid, endpoint):
            return
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        if child is not None:
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(pid, signal.SIGKILL)
                child.wait()

    def auth_headers(self, handle: dict[str, Any]) -> dict[str, str]:
        return {}

    def is_running(self, handle: dict[str, Any]) -> bool:
        with self._lock:
            child = self._children.get(str(handle.get("endpoint", "")))
        return child is not None and child.poll() is None

    def managed_endpoints(self) -> set[str]:
        with self._lock:
            return {endpoint for endpoint, child in self._children.items() if child.poll() is None}

    @staticmethod
    def _is_ours(pid: int, endpoint: str) -> bool:
        """A server left by an earlier envhub: its environment names the endpoint."""
        if pid <= 0:
            return False
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            return False
        return f"{ENDPOINT_VARIABLE}={endpoint}".encode() in environ.split(b"\0")
