"""The process backend: an environment folder served by uvicorn as a local subprocess.

The folder is a template's, or a Hub Space's downloaded at its pinned commit (snapshots.py), in any
layout seen in real Spaces (layouts.py); a Space whose Dockerfile needs more than Python (system
packages, another base image) is refused before anything starts. When its own requirements are not met by
envhub's interpreter, they go into a virtualenv cached by the hash of those
requirements, layered over envhub's packages so that only what differs is installed.
A server can instead be forked from a zygote that has imported uvicorn and openenv already
(zygote.py), which saves seconds per launch: one of envhub's own interpreter, and one per
virtualenv in use (the most recently used few), so a pool of a virtualenv's servers grows
in forks too.
Servers run as an unprivileged user of their own, each with a home of its own, and see none
of envhub's data (confinement.py); in a view, each has processes of its own and sees no other
server's home or snapshot (views.py, isolation.py); a sandboxed one runs in a view of bubblewrap's
with no network but its own loopback, and is handed its listening socket. Each is held to the
limits of isolation.Limits.
"""

import os
import socket
import subprocess
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from catalog.models import EnvironmentDetail, Source
from core.errors import InvalidInputError, LaunchError
from hosting.models import Backend
from hosting.options import ProcessOptions, interpreter_refusal, starts_the_interpreter
from hosting.runtimes.base import Handle, Launched, LaunchSpec, Report, serve_when_healthy
from hosting.runtimes.confinement import SERVER_USER, Confinement
from hosting.runtimes.dockerfiles import needs_docker, parse_dockerfile, python_of
from hosting.runtimes.isolation import Limits
from hosting.runtimes.layouts import FolderFiles, Layout, find_layout, root_names, template_layout
from hosting.runtimes.logs import note_exit
from hosting.runtimes.processes import Gate, end_group, environ_names, free_port, started_at
from hosting.runtimes.snapshots import Snapshots
from hosting.runtimes.venvs import Virtualenvs
from hosting.runtimes.views import View
from hosting.runtimes.zygote import ISOLATION, SCRIPT, WS_MAX_SIZE, ServerRequest, Zygote, forkable

ENDPOINT_VARIABLE = "ENVHUB_ENDPOINT"  # set in each server's environment, to recognise it later
_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"  # what servers run on: envhub's, or layered on it
_PASSED_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SSL_CERT_FILE", "PIP_INDEX_URL")
VENV_ZYGOTES = 4  # virtualenvs whose zygotes are kept: each holds openenv's imports (about 150 MB)
_CLOSE_WAIT_S = 30  # how long close() waits for servers being started to be known, to stop them too
_OWN = ("HOME", "TMPDIR")  # a confined server's own: its home, and the view's /tmp or the machine's


@dataclass(frozen=True)
class _Child:
    """A server envhub started from scratch: the process it started (bubblewrap, for a server in a view), and the
    server's own pid (the leader of its process group)."""

    process: subprocess.Popen[bytes]
    pid: int
    viewed: bool = False


class ProcessHandle(Handle):
    port: int
    pid: int
    started: str | None = None  # a forked server's start time ("boot/ticks"): with the pid it names one process


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
        user: str = SERVER_USER,
        closed: Sequence[Path] = (),
        templates: Sequence[Path] = (),
        logs_dir: Path | None = None,
        limits: Limits = Limits(),  # noqa: B008 (frozen)
    ) -> None:
        """preload: fork servers that use envhub's interpreter from a zygote (see zygote.py).

        hub_endpoint, hub_token: where Spaces download from (None: HF_ENDPOINT), and envhub's own token, for
        launches by nobody in particular (a signed-in user's launch downloads with their token).
        user, closed: who servers run as when envhub is root, and envhub's folders and files they must not read
        (see confinement.py). templates, logs_dir: the folders a zygote in a view shows its servers beside this
        runtime's own (template roots, where their logs are written); a server from elsewhere starts from scratch.
        limits: what each server may use.
        """
        self.work_dir = work_dir.resolve()  # servers run in their own folders: a relative path would point elsewhere
        self.virtualenvs = Virtualenvs(self.work_dir / "venvs", install_timeout_s=install_timeout_s)
        self.snapshots = Snapshots(self.work_dir / "spaces", hub_endpoint, hub_token)
        self.confinement = Confinement(self.work_dir, user, closed=closed)
        self.ready_timeout_s = ready_timeout_s
        self.limits = limits
        self._zygote_read = [self.snapshots.root, self.work_dir / "packages", *(p.resolve() for p in templates)]
        self._logs = [logs_dir.resolve()] if logs_dir is not None else []
        self._zygote_write = [self.confinement.homes, *self._logs]
        self._zygote_env = {k: os.environ[k] for k in _PASSED_THROUGH if k in os.environ and k not in _OWN}
        self._zygote = self._new_zygote(sys.executable, "zygote") if preload else None
        # A virtualenv's servers fork from a zygote of its own interpreter: a pool of them grows in forks, not in
        # interpreters importing openenv one after another. The least recently used goes past VENV_ZYGOTES.
        self._venv_zygotes: OrderedDict[str, Zygote] = OrderedDict()
        self._children: dict[str, _Child] = {}
        self._forked: dict[str, tuple[int, str]] = {}  # endpoint -> (pid, start time) of servers forked by the zygote
        self._lock = threading.Lock()
        self._gate = Gate()  # servers go with envhub: once it closes, no launch starts one

    def _new_zygote(self, python: str, name: str) -> Zygote:
        return Zygote(
            self.work_dir,
            self._zygote_env,
            ready_timeout_s=max(self.ready_timeout_s, 120),
            wrap=self._wrap_zygote,
            python=python,
            name=name,
        )

    def _zygote_of(self, python: str) -> Zygote | None:
        """The zygote that forks servers of this interpreter, when servers are preloaded."""
        if self._zygote is None or python == sys.executable:
            return self._zygote
        with self._lock:
            zygote = self._venv_zygotes.pop(python, None) or self._new_zygote(
                python, f"zygote-{Path(python).parts[-3]}"
            )
            self._venv_zygotes[python] = zygote
            retired = self._venv_zygotes.popitem(last=False)[1] if len(self._venv_zygotes) > VENV_ZYGOTES else None
        if retired is not None:
            retired.close()  # its servers outlive it
        return zygote

    def warm(self) -> None:
        """Start the zygote now rather than at the first launch (which then waits for it)."""
        if self._zygote is not None:
            self._zygote.warm()

    def check(
        self, environment: EnvironmentDetail, options: ProcessOptions, token: str | None = None
    ) -> ProcessOptions:
        if options.sandbox and self.confinement.bubblewrap() is None:
            raise InvalidInputError(
                "this process server would run in a sandbox (with sign-in on, every launch but the admin's does), "
                "and this machine has no bubblewrap to make one: launch with the docker backend, or ask the admin to "
                "install bubblewrap (apt-get install bubblewrap)"
            )
        if options.sandbox and self.confinement.as_root and self.confinement.user() is None:
            raise InvalidInputError(
                "this process server would run in a sandbox as an unprivileged user, and ENVHUB_PROCESS_USER names "
                "none: launch with the docker backend, or ask the admin to set it (envhub-env, say)"
            )
        variables = options.env | options.secrets
        if refused := sorted(name for name in variables if starts_the_interpreter(name)):
            raise InvalidInputError(interpreter_refusal(refused), code="variables_refused")
        if (options.sandbox or self.confinement.user() is not None) and "HOME" in variables:
            raise InvalidInputError("the process backend gives each server a home of its own: leave HOME out")
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
                "launch it with the docker or space backend",
                code="not_a_hub_space",
            )
        if environment.sdk not in (None, "docker"):
            raise InvalidInputError(
                f"{environment.id} is a {environment.sdk} Space, and the process backend runs Docker Spaces that "
                "serve an OpenEnv app; launch it with the space backend",
                code="not_a_docker_space",
            )
        if environment.sha is None:
            raise InvalidInputError(
                f"the catalog has no commit of {environment.id} to download: sync the catalog first",
                code="not_synced",
            )
        files = self.snapshots.files(environment.id, environment.sha, token)
        dockerfile = files.read("Dockerfile")
        reason = needs_docker(parse_dockerfile(dockerfile)) if dockerfile is not None else None
        if reason is None and find_layout(files, root_names(environment)) is None:
            reason = (
                "it has no OpenEnv app to serve: no openenv.yaml app, server/app.py, envs/<name>/server/app.py "
                "or Dockerfile command (uvicorn module:app) that names a module in it"
            )
        if reason is not None:
            raise InvalidInputError(
                f"{environment.id}@{environment.sha[:12]} cannot run as a local process: {reason}; "
                "launch it with the docker or space backend",
                code="needs_docker_backend",
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
        sandbox = spec.options.sandbox
        self.confinement.prepare()
        user = self.confinement.user()
        home = self.confinement.home(spec.server_id) if sandbox or user is not None else None
        with self._gate.passage():  # close() waits for it to be known, and then stops it
            # A sandboxed server has a network of its own: it serves on a socket made here, on the machine's loopback.
            listener = _listening_socket() if sandbox else None
            port = listener.getsockname()[1] if listener is not None else free_port()
            env = {k: os.environ[k] for k in _PASSED_THROUGH if k in os.environ and not (home and k in _OWN)}
            env |= spec.env  # no launch sets PATH or PYTHON* (LaunchOptions), and envhub's own come last
            env |= {"PYTHONPATH": os.pathsep.join(pythonpath), "PYTHONUNBUFFERED": "1", "PORT": str(port)}
            env |= {"HOME": str(home)} if home is not None else {}
            env |= {ENDPOINT_VARIABLE: spec.server_id}
            report(f"starting {app} on port {port}" + (" in a sandbox" if sandbox else ""))
            spec.log_path.parent.mkdir(parents=True, exist_ok=True)
            with spec.log_path.open("a", encoding="utf-8") as log:  # which layout rule chose the app, for a failure
                log.write(f"envhub: serving {app} from {cwd}; layout: {layout.found_in}\n")
            pid = None
            imports = [Path(entry) for entry in pythonpath]
            zygote = self._zygote_of(python)
            if zygote is not None and forkable(spec.env) and self._forks(sandbox, [cwd, *imports, spec.log_path]):
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
                    uid=user.uid if user is not None else None,
                    gid=user.gid if user is not None else None,
                    limits=asdict(self.limits),
                    **self._own_view(python, [cwd, *imports, *([home] if home is not None else [])]),
                )
                pid = zygote.spawn(request)
            if pid is not None:
                # A forked server's /proc environ is the zygote's; its start time identifies it instead
                # ("gone" when it has exited already: the wait below then reports its log).
                started = started_at(pid) or "gone"
                handle = ProcessHandle(
                    server=spec.server_id, root_path=spec.root_path, port=port, pid=pid, started=started
                )
                with self._lock:
                    self._forked[spec.server_id] = (pid, started)
            else:
                where = ["--fd", str(listener.fileno())] if listener else ["--host", "127.0.0.1", "--port", str(port)]
                argv = [python, "-m", "uvicorn", app, *where, "--root-path", spec.root_path]
                argv += ["--ws-max-size", str(WS_MAX_SIZE)]
                try:
                    child = self._from_scratch(argv, env, cwd, spec.log_path, [folder, *imports], home, listener)
                except LaunchError:
                    self.confinement.release(spec.server_id)
                    raise
                finally:
                    if listener is not None:
                        listener.close()  # the server has its own copy
                handle = ProcessHandle(server=spec.server_id, root_path=spec.root_path, port=port, pid=child.pid)
                with self._lock:
                    self._children[spec.server_id] = child
                threading.Thread(
                    target=_note_when_it_ends,
                    args=(child, spec.log_path),
                    name=f"wait-{spec.server_id}",
                    daemon=True,
                ).start()
        url = f"http://127.0.0.1:{port}"
        launched = serve_when_healthy(
            self,
            Launched(url, handle),
            timeout_s=self.ready_timeout_s,
            what=f"the server of {spec.environment.id}",
            log_path=spec.log_path,
            started=spec.on_started,
        )
        if not spec.environment.path:
            self.snapshots.hold(spec.server_id, folder)  # a later download keeps it while the server runs
        return launched

    def _from_scratch(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: Path,
        log_path: Path,
        folders: list[Path],
        home: Path | None,
        listener: socket.socket | None,
    ) -> _Child:
        """The server started from scratch: a new interpreter running uvicorn, in a view when it runs in one (a
        sandboxed server, which has a listener, always does). folders: the environment's, and its import path."""
        sandbox = listener is not None
        if not self.confinement.viewed(sandbox):
            process = self.confinement.popen(self.limits.command(argv), env, cwd, log_path)
            return _Child(process, process.pid)
        shown = (*self.confinement.python_folders(argv[0]), *folders)
        write = (home,) if home is not None else ()
        view = View(read=shown, write=write, sandboxed=sandbox, tmp_bytes=self.limits.disk)
        keep = [listener.fileno()] if listener is not None else []
        process, pid = self.confinement.start(view, self.limits.command(argv), env, cwd, log_path, keep_fds=keep)
        return _Child(process, pid, viewed=True)

    def _own_view(self, python: str, folders: list[Path]) -> dict[str, list[str]]:
        """What a server forked by a zygote in a view hides of it: the folders that hold every server's home,
        snapshot and log, but for its own folders (and its interpreter's) among them."""
        if not self.confinement.viewed(sandbox=False):
            return {}  # the zygote runs on the machine itself, where a server cannot mount
        hidden = [self.work_dir, *self._logs]
        shown = [*self.confinement.python_folders(python), *folders]
        return {"hidden": [str(path) for path in hidden], "shown": [str(path.resolve()) for path in shown]}

    def _forks(self, sandbox: bool, paths: list[Path]) -> bool:
        """Whether the zygote may fork this server: never a sandboxed one (each has a view of its own), and one
        whose folders a zygote in a view shows."""
        if sandbox:
            return False
        if not self.confinement.viewed(sandbox=False):
            return True  # the zygote runs on the machine itself
        shown = [*self._zygote_read, *self._zygote_write]
        return all(any(path.resolve().is_relative_to(folder) for folder in shown) for path in paths)

    def _wrap_zygote(self, argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str], list[int]]:
        """The zygote as it starts: in a view when servers run in views, which shows it Python, the folders its
        servers may run from, their homes and logs."""
        self.confinement.prepare()
        for folder in (self.snapshots.root, self.work_dir / "packages", *self._zygote_write):
            folder.mkdir(parents=True, exist_ok=True)  # a folder shown in a view must be there as it starts
        python = argv[0]  # envhub's interpreter or a virtualenv's
        read = (*self.confinement.python_folders(python), Path(SCRIPT), Path(ISOLATION), *self._zygote_read)
        # Its processes are the machine's: each server it forks makes its own (isolation.own_view).
        view = View(read=read, write=tuple(self._zygote_write), own_processes=False)
        wrapped = self.confinement.wrap_zygote(view, argv, env)
        return (argv, env, []) if wrapped is None else (wrapped.argv, wrapped.env, wrapped.fds)

    def _folder(self, spec: LaunchSpec[ProcessOptions], report: Report) -> tuple[Path, Layout]:
        """The folder to serve (a Space's downloaded at its commit) and its layout."""
        environment = spec.environment
        if environment.path:
            folder = Path(environment.path)
            return folder, template_layout(folder, root_names(environment))
        if environment.sha is None:  # check() refused it
            raise LaunchError(f"the catalog has no commit of {environment.id} to download: sync the catalog first")
        folder = self.snapshots.fetch(environment.id, environment.sha, spec.token, report)
        layout = find_layout(FolderFiles(folder), root_names(environment))
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

    def stop(self, handle: ProcessHandle) -> None:
        self.snapshots.release(handle.server)
        with self._lock:
            child = self._children.pop(handle.server, None)
            forked = self._forked.pop(handle.server, None)
        if child is None and forked is None and not self._is_ours(handle):
            return  # the pid is someone else's now: the server ended while no envhub watched it
        end_group(handle.pid, reap=child.process.poll if child is not None else None)
        self.confinement.release(handle.server)

    def stop_leftover(self, server_id: str) -> None:
        self.snapshots.release(server_id)
        with self._lock:
            child = self._children.pop(server_id, None)
            forked = self._forked.pop(server_id, None)
        if child is not None:
            end_group(child.pid, reap=child.process.poll)
        elif forked is not None:
            end_group(forked[0])
        self.confinement.release(server_id)

    def close(self) -> None:
        """The zygotes end, and every server started here with them: a launch under way fails rather than leave one
        behind."""
        for zygote in [self._zygote, *self._venv_zygotes.values()]:
            if zygote is not None:
                zygote.close()  # a start waiting for a zygote gives up at once
        self._gate.close(timeout_s=_CLOSE_WAIT_S)
        with self._lock:
            left = [*self._children, *self._forked]
        for server_id in left:
            self.stop_leftover(server_id)

    def auth_headers(self, handle: ProcessHandle) -> dict[str, str]:
        return {}

    def is_running(self, handle: ProcessHandle) -> bool:
        with self._lock:
            child = self._children.get(handle.server)
            forked = self._forked.get(handle.server)
        if forked is not None:
            return started_at(forked[0]) == forked[1]
        return child is not None and child.process.poll() is None

    def sweep(self, live_instances: set[str]) -> None:
        pass  # the zygote, started ahead of launches, ends with its own envhub

    def managed_servers(self) -> set[str]:
        with self._lock:
            children = dict(self._children)
            forked = dict(self._forked)
        running = {endpoint for endpoint, child in children.items() if child.process.poll() is None}
        return running | {endpoint for endpoint, (pid, started) in forked.items() if started_at(pid) == started}

    @staticmethod
    def _is_ours(handle: ProcessHandle) -> bool:
        """A server left by an earlier envhub: its start time matches, or (started from scratch) its environment
        names the endpoint."""
        if handle.started is not None:
            return started_at(handle.pid) == handle.started
        return environ_names(handle.pid, f"{ENDPOINT_VARIABLE}={handle.server}")


def _listening_socket() -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(2048)  # uvicorn's own backlog
    return listener


def _note_when_it_ends(child: _Child, log_path: Path) -> None:
    code = child.process.wait()
    # bubblewrap passes the server's exit code on, and a signal that killed it as 128 + its number, as shells do.
    note_exit(str(log_path), 128 - code if child.viewed and code > 128 else code)
