"""The process backend: an environment folder served by uvicorn as a local subprocess.

The folder is a template's, or a Hub Space's downloaded at its pinned commit (snapshots.py), in any
layout seen in real Spaces (layouts.py); a Space whose Dockerfile needs more than Python (system
packages, another base image) is refused before anything starts. When its own requirements are not met by
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

from catalog.models import EnvironmentDetail, Source
from core.errors import InvalidInputError, LaunchError
from hosting.models import Backend
from hosting.options import ProcessOptions
from hosting.runtimes import Launched, LaunchSpec, ProcessHandle, Report, serve_when_healthy
from hosting.runtimes.dockerfiles import needs_docker, parse_dockerfile, python_of
from hosting.runtimes.layouts import FolderFiles, Layout, find_layout, template_layout
from hosting.runtimes.logs import note_exit
from hosting.runtimes.processes import end_group, environ_names, free_port, started_at
from hosting.runtimes.snapshots import Snapshots
from hosting.runtimes.venvs import Virtualenvs
from hosting.runtimes.zygote import WS_MAX_SIZE, ServerRequest, Zygote, forkable

ENDPOINT_VARIABLE = "ENVHUB_ENDPOINT"  # set in each server's environment, to recognise it later
_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"  # what servers run on: envhub's, or layered on it
_PASSED_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SSL_CERT_FILE", "PIP_INDEX_URL")


class ProcessRuntime:
    name = Backend.PROCESS
    handle_type = ProcessHandle

    def __init__(
        self,
        work_dir: Path,
        *,
        ready_timeout_s: float = 60,
        install_timeout_s: float = 900,
        preload: bool = False,
        hub_endpoint: str | None = None,
        hub_token: str | None = None,
    ) -> None:
        """preload: fork servers that use envhub's interpreter from a zygote (see zygote.py).

        hub_endpoint, hub_token: where Spaces download from (None: HF_ENDPOINT), and envhub's own token, for
        launches by nobody in particular (a signed-in user's launch downloads with their token).
        """
        self.work_dir = work_dir.resolve()  # servers run in their own folders: a relative path would point elsewhere
        self.virtualenvs = Virtualenvs(self.work_dir / "venvs", install_timeout_s=install_timeout_s)
        self.snapshots = Snapshots(self.work_dir / "spaces", hub_endpoint, hub_token)
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
        if environment.path:
            if not Path(environment.path).is_dir():
                raise InvalidInputError(
                    f"the folder of {environment.id} ({environment.path}) is gone; restart envhub to index "
                    "its templates again"
                )
            return options
        self._check_space(environment, token)
        return options

    def _check_space(self, environment: EnvironmentDetail, token: str | None) -> None:
        """Refuse a Space that cannot run here, from its files at the commit (read from the Hub, unless downloaded)."""
        if environment.source != Source.HUB:
            raise InvalidInputError(
                f"the process backend runs templates and Hub Spaces, and {environment.id} is neither; "
                "launch it with the docker or space backend"
            )
        if environment.sdk not in (None, "docker"):
            raise InvalidInputError(
                f"{environment.id} is a {environment.sdk} Space, and the process backend runs Docker Spaces that "
                "serve an OpenEnv app; launch it with the space backend"
            )
        if environment.sha is None:
            raise InvalidInputError(
                f"the catalog has no commit of {environment.id} to download: sync the catalog first"
            )
        files = self.snapshots.files(environment.id, environment.sha, token)
        dockerfile = files.read("Dockerfile")
        reason = needs_docker(parse_dockerfile(dockerfile)) if dockerfile is not None else None
        if reason is None and find_layout(files, _names(environment)) is None:
            reason = (
                "it has no OpenEnv app to serve: no openenv.yaml app, server/app.py, envs/<name>/server/app.py "
                "or Dockerfile command (uvicorn module:app) that names a module in it"
            )
        if reason is not None:
            raise InvalidInputError(
                f"{environment.id}@{environment.sha[:12]} cannot run as a local process: {reason}; "
                "launch it with the docker or space backend"
            )

    def start(self, spec: LaunchSpec[ProcessOptions], report: Report) -> Launched[ProcessHandle]:
        folder, layout = self._folder(spec, report)
        dockerfile = (
            parse_dockerfile((folder / "Dockerfile").read_text()) if (folder / "Dockerfile").is_file() else None
        )
        if dockerfile is not None and (wanted := python_of(dockerfile)) not in (None, _PYTHON):
            report(f"its Dockerfile builds on Python {wanted}; it runs here on envhub's Python {_PYTHON}")
        installs = dockerfile.python_packages if dockerfile is not None else []
        python = self.virtualenvs.interpreter(folder / layout.requirements, spec.log_path, report, installs)
        cwd = folder / layout.cwd
        pythonpath = [str(cwd), *(str(folder / entry) for entry in layout.path)]
        if layout.package is not None:
            pythonpath.append(str(self._package_shim(folder, layout.package, spec.server_id)))
        app = layout.app
        port = free_port()
        env = {k: os.environ[k] for k in _PASSED_THROUGH if k in os.environ}
        env |= spec.env  # no launch sets PATH or PYTHON* (LaunchOptions), and envhub's own come last
        env |= {"PYTHONPATH": os.pathsep.join(pythonpath), "PYTHONUNBUFFERED": "1", "PORT": str(port)}
        env |= {ENDPOINT_VARIABLE: spec.server_id}
        report(f"starting {app} on port {port}")
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        with spec.log_path.open("a", encoding="utf-8") as log:  # which layout rule chose the app, for a failure
            log.write(f"envhub: serving {app} from {cwd}; layout: {layout.found_in}\n")
        pid = None
        if self._zygote is not None and python == sys.executable and forkable(spec.env):
            name = f"env-{spec.server_id}"  # what ps shows for it
            # Absolute paths: the zygote works in its own folder, not in envhub's.
            request = ServerRequest(
                app,
                str(cwd.resolve()),
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
            child = self._popen(python, app, cwd, env, port, spec.log_path, spec.root_path)
            handle = ProcessHandle(server=spec.server_id, root_path=spec.root_path, port=port, pid=child.pid)
            with self._lock:
                self._children[spec.server_id] = child
            threading.Thread(
                target=_note_when_it_ends, args=(child, spec.log_path), name=f"wait-{spec.server_id}", daemon=True
            ).start()
        url = f"http://127.0.0.1:{port}"
        launched = serve_when_healthy(
            self,
            Launched(url, handle),
            timeout_s=self.ready_timeout_s,
            what=f"the server of {spec.environment.id}",
            log_path=spec.log_path,
        )
        if not spec.environment.path:
            self.snapshots.hold(spec.server_id, folder)  # a later download keeps it while the server runs
        return launched

    def _folder(self, spec: LaunchSpec[ProcessOptions], report: Report) -> tuple[Path, Layout]:
        """The folder to serve (a Space's downloaded at its commit) and its layout."""
        environment = spec.environment
        if environment.path:
            folder = Path(environment.path)
            return folder, template_layout(folder, _names(environment))
        if environment.sha is None:  # check() refused it
            raise LaunchError(f"the catalog has no commit of {environment.id} to download: sync the catalog first")
        folder = self.snapshots.fetch(environment.id, environment.sha, spec.token, report)
        layout = find_layout(FolderFiles(folder), _names(environment))
        if layout is None:
            raise LaunchError(f"{environment.id}@{environment.sha[:12]} has no OpenEnv app to serve")
        return folder, layout

    def _package_shim(self, folder: Path, package: str, server_id: str) -> Path:
        """A folder where the environment's root is importable under its package name, so that both
        `from ..models import X` (the app loaded as package.server.app) and `from package.models import X` work."""
        shim = self.work_dir / "packages" / server_id
        shim.mkdir(parents=True, exist_ok=True)
        link = shim / package
        if not link.exists():
            link.symlink_to(folder.resolve(), target_is_directory=True)
        return shim

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
        self.snapshots.release(handle.server)
        with self._lock:
            child = self._children.pop(handle.server, None)
            forked = self._forked.pop(handle.server, None)
        if child is None and forked is None and not self._is_ours(handle):
            return  # the pid is someone else's now: the server ended while no envhub watched it
        end_group(handle.pid, reap=child.poll if child is not None else None)

    def stop_leftover(self, server_id: str) -> None:
        self.snapshots.release(server_id)
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


def _names(environment: EnvironmentDetail) -> list[str]:
    """What an environment's root may be imported by: its folder's name, or its Space's."""
    return [Path(environment.path).name if environment.path else environment.id.rpartition("/")[2]]


def _note_when_it_ends(child: subprocess.Popen[bytes], log_path: Path) -> None:
    note_exit(str(log_path), child.wait())
