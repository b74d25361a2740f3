"""The process backend: an environment folder served by uvicorn as a local subprocess.

The folder is any OpenEnv Space layout. When its own requirements are not met by
envhub's interpreter, they go into a virtualenv cached by the hash of those
requirements, layered over envhub's packages so that only what differs is installed.
A folder that runs on envhub's own interpreter can instead be forked from a zygote that
has imported uvicorn and openenv already (zygote.py), which saves seconds per launch.
"""

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from catalog.models import EnvironmentDetail
from core.errors import InvalidInputError
from hosting.models import Backend
from hosting.options import ProcessOptions
from hosting.runtimes import Launched, LaunchSpec, ProcessHandle, Report, serve_when_healthy
from hosting.runtimes.logs import note_exit
from hosting.runtimes.processes import end_group, environ_names, free_port, started_at
from hosting.runtimes.venvs import Virtualenvs
from hosting.runtimes.zygote import WS_MAX_SIZE, ServerRequest, Zygote, forkable

ENDPOINT_VARIABLE = "ENVHUB_ENDPOINT"  # set in each server's environment, to recognise it later
_PASSED_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SSL_CERT_FILE", "PIP_INDEX_URL")


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
    handle_type = ProcessHandle

    def __init__(
        self, work_dir: Path, *, ready_timeout_s: float = 60, install_timeout_s: float = 900, preload: bool = False
    ) -> None:
        """preload: fork servers that use envhub's interpreter from a zygote (see zygote.py)."""
        self.work_dir = work_dir.resolve()  # servers run in their own folders: a relative path would point elsewhere
        self.virtualenvs = Virtualenvs(self.work_dir / "venvs", install_timeout_s=install_timeout_s)
        self.ready_timeout_s = ready_timeout_s
        zygote_env = {k: os.environ[k] for k in _PASSED_THROUGH if k in os.environ}
        self._zygote = Zygote(work_dir, zygote_env, ready_timeout_s=max(ready_timeout_s, 120)) if preload else None
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._forked: dict[str, tuple[int, str]] = {}  # endpoint -> (pid, start time) of servers forked by the zygote
        self._lock = threading.Lock()

    def warm(self) -> None:
        """Start the zygote now rather than at the first launch (which then waits for it)."""
        if self._zygote is not None:
            self._zygote.warm()

    def check(
        self, environment: EnvironmentDetail, options: ProcessOptions, token: str | None = None
    ) -> ProcessOptions:
        if not environment.path or not Path(environment.path).is_dir():
            raise InvalidInputError(
                f"the process backend runs local environment folders, and {environment.id} has none; "
                "launch it with the docker or space backend"
            )
        return options

    def start(self, spec: LaunchSpec[ProcessOptions], report: Report) -> Launched[ProcessHandle]:
        folder = Path(spec.environment.path or "")
        python = self.virtualenvs.interpreter(folder, spec.log_path, report)
        app, pythonpath = self._layout(folder, spec)
        port = free_port()
        env = {k: os.environ[k] for k in _PASSED_THROUGH if k in os.environ}
        env |= spec.env  # no launch sets PATH or PYTHON* (LaunchOptions), and envhub's own come last
        env |= {"PYTHONPATH": os.pathsep.join(pythonpath), "PYTHONUNBUFFERED": "1", "PORT": str(port)}
        env |= {ENDPOINT_VARIABLE: spec.server_id}
        report(f"starting {app} on port {port}")
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        pid = None
        if self._zygote is not None and python == sys.executable and forkable(spec.env):
            name = f"env-{spec.server_id}"  # what ps shows for it
            # Absolute paths: the zygote works in its own folder, not in envhub's.
            request = ServerRequest(
                app,
                str(folder.resolve()),
                [str(Path(entry).resolve()) for entry in pythonpath],
                env,
                str(spec.log_path.resolve()),
                port,
                name,
                spec.root_path,
            )
            pid = self._zygote.spawn(request)
        if pid is not None:
            # A forked server's /proc environ is the zygote's; its start time identifies it instead
            # ("gone" when it has exited already: the wait below then reports its log).
            started = started_at(pid) or "gone"
            handle = ProcessHandle(server=spec.server_id, root_path=spec.root_path, port=port, pid=pid, started=started)
            with self._lock:
                self._forked[spec.server_id] = (pid, started)
        else:
            child = self._popen(python, app, folder, env, port, spec.log_path, spec.root_path)
            handle = ProcessHandle(server=spec.server_id, root_path=spec.root_path, port=port, pid=child.pid)
            with self._lock:
                self._children[spec.server_id] = child
            threading.Thread(
                target=_note_when_it_ends, args=(child, spec.log_path), name=f"wait-{spec.server_id}", daemon=True
            ).start()
        url = f"http://127.0.0.1:{port}"
        return serve_when_healthy(
            self,
            Launched(url, handle),
            timeout_s=self.ready_timeout_s,
            what=f"the server of {spec.environment.id}",
            log_path=spec.log_path,
        )

    def _layout(self, folder: Path, spec: LaunchSpec[ProcessOptions]) -> tuple[str, list[str]]:
        """The app to serve and the import path, for the three layouts seen in the wild."""
        manifest = spec.environment.manifest or {}
        app = str(manifest.get("app") or "server.app:app")
        package = _package_name(folder, manifest)
        pythonpath = [str(folder)]
        if package is not None:
            # The folder is importable under its package name, so both `from ..models import X`
            # (the app loaded as package.server.app) and `from package.models import X` work.
            shim = self.work_dir / "packages" / spec.server_id
            shim.mkdir(parents=True, exist_ok=True)
            link = shim / package
            if not link.exists():
                link.symlink_to(folder.resolve(), target_is_directory=True)
            pythonpath.append(str(shim))
            app = f"{package}.{app}"
        return app, pythonpath

    @staticmethod
    def _popen(
        python: str, app: str, folder: Path, env: dict[str, str], port: int, log_path: Path, root_path: str
    ) -> subprocess.Popen[bytes]:
        """The server started from scratch: a new interpreter running uvicorn."""
        argv = [python, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port), "--root-path", root_path]
        with log_path.open("ab") as log:
            return subprocess.Popen(
                [*argv, "--ws-max-size", str(WS_MAX_SIZE)],
                cwd=folder,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, stopped as a whole
            )

    def stop(self, handle: ProcessHandle) -> None:
        with self._lock:
            child = self._children.pop(handle.server, None)
            forked = self._forked.pop(handle.server, None)
        if child is None and forked is None and not self._is_ours(handle):
            return  # the pid is someone else's now: the server ended while no envhub watched it
        end_group(handle.pid, reap=child.poll if child is not None else None)

    def stop_leftover(self, server_id: str) -> None:
        with self._lock:
            child = self._children.pop(server_id, None)
            forked = self._forked.pop(server_id, None)
        if child is not None:
            end_group(child.pid, reap=child.poll)
        elif forked is not None:
            end_group(forked[0])

    def close(self) -> None:
        if self._zygote is not None:
            self._zygote.close()

    def auth_headers(self, handle: ProcessHandle) -> dict[str, str]:
        return {}

    def is_running(self, handle: ProcessHandle) -> bool:
        with self._lock:
            child = self._children.get(handle.server)
            forked = self._forked.get(handle.server)
        if forked is not None:
            return started_at(forked[0]) == forked[1]
        return child is not None and child.poll() is None

    def sweep(self, live_replicas: set[str]) -> None:
        pass  # the zygote, started ahead of launches, ends with its own envhub

    def managed_servers(self) -> set[str]:
        with self._lock:
            children = dict(self._children)
            forked = dict(self._forked)
        running = {endpoint for endpoint, child in children.items() if child.poll() is None}
        return running | {endpoint for endpoint, (pid, started) in forked.items() if started_at(pid) == started}

    @staticmethod
    def _is_ours(handle: ProcessHandle) -> bool:
        """A server left by an earlier envhub: its start time matches, or (started from scratch) its environment
        names the endpoint."""
        if handle.started is not None:
            return started_at(handle.pid) == handle.started
        return environ_names(handle.pid, f"{ENDPOINT_VARIABLE}={handle.server}")


def _note_when_it_ends(child: subprocess.Popen[bytes], log_path: Path) -> None:
    note_exit(str(log_path), child.wait())
