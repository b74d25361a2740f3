"""A preloaded interpreter that forks environment servers, so a launch skips Python's start-up.

Importing openenv's server imports gradio, which costs seconds of CPU in every new
interpreter. The zygote is one long-lived process, started from envhub's own interpreter
with a minimal environment, that imports uvicorn and openenv once and then forks a
server per request. A forked server is a session leader (stopped by its process group),
runs in the environment folder with the same sys.path, variables, log file and user as a
server started from scratch (a zygote of envhub's as root drops to the servers' user in
each child, once its log is open), and outlives the zygote. The zygote exits when its control
pipe closes, so it never outlives envhub; it reaps its children, and notes in each
one's log how it ended (its exit code, or the signal that killed it). It forks only
while it has a single thread: numpy's BLAS would start a thread pool at import, and
pyarrow's allocator a purging thread, so the zygote turns both off.

This file runs as a script (`python -P zygote.py`) and so imports only the standard
library at the top; envhub uses `Zygote`, the parent side, from the same module.
"""

import contextlib
import gc
import importlib
import importlib.util
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

PRELOAD = (
    "uvloop",
    "uvicorn",
    "uvicorn.loops.auto",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.websockets.auto",
    "uvicorn.lifespan.on",
    "openenv.core.env_server.http_server",
)
ONE_THREAD = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    # pyarrow (which pandas, and so gradio, imports when it is installed) starts jemalloc's purging thread.
    "JE_ARROW_MALLOC_CONF": "background_thread:false",
}
# Variables the interpreter or a preloaded library reads when it starts: a forked server
# would not see them take effect, so a launch that sets one starts from scratch.
READ_AT_START = ("PYTHON", "LD_", "LC_", "LANG", "TZ", "OPENBLAS_", "OMP_", "MKL_", "JE_", "GRADIO_", "HF_", "UVICORN_")
READ_LATER = {"HF_TOKEN"}  # huggingface_hub reads it on each call
WS_MAX_SIZE = 100 * 1024 * 1024
SCRIPT = os.path.abspath(__file__)  # what the zygote runs: this file
ISOLATION = os.path.join(os.path.dirname(SCRIPT), "isolation.py")  # what it loads beside it (see that file)
# A command and its variables as they are started (in a view, say), and the descriptors the process inherits.
Wrapper = Callable[[list[str], dict[str, str]], tuple[list[str], dict[str, str], list[int]]]

log = logging.getLogger(__name__)


EXIT_NOTE = "envhub: the server "  # starts the line written to a server's log when it ends


def describe_exit(code: int) -> str:
    """How a process ended, from its exit code as subprocess gives it (negative: the signal that killed it)."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = "unknown"
    return f"was killed by signal {-code} ({name})"


def note_exit(log_path: str, code: int) -> None:
    """Append to a server's log how it ended, so that its endpoint can say why it stopped."""
    with contextlib.suppress(OSError), open(log_path, "a", encoding="utf-8") as log:
        log.write(f"{EXIT_NOTE}{describe_exit(code)}\n")


def forkable(env: dict[str, str]) -> bool:
    """Whether a server with these variables behaves the same forked as started from scratch."""
    return not any(name.startswith(READ_AT_START) and name not in READ_LATER for name in env)


@dataclass(frozen=True)
class ServerRequest:
    app: str  # uvicorn's "module:attribute"
    cwd: str
    path: list[str]  # what PYTHONPATH would hold, in order
    env: dict[str, str]  # the server's whole environment
    log: str
    port: int
    name: str = ""  # what ps and top show for the server (at most 15 bytes)
    root_path: str = ""  # the ASGI root_path: where the gateway serves it
    uid: int | None = None  # the user the server runs as (None: the zygote's own)
    gid: int | None = None
    limits: dict[str, int] = field(default_factory=dict)  # isolation.Limits' fields (missing ones: its defaults)
    # Folders of the zygote's view the server sees empty but for what of `shown` they hold, in processes and
    # mounts of its own (isolation.own_view); empty: it runs in the zygote's.
    hidden: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)


# -- the zygote process


_LOGS: dict[int, str] = {}  # forked server pid -> its log, until it is reaped
_isolation: ModuleType | None = None  # isolation.py, loaded as the zygote starts


def _reap(_signum: int, _frame: object) -> None:
    """Collect every forked server that ended, and note in its log how it ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        log_path = _LOGS.pop(pid, None)
        if log_path is not None:
            note_exit(log_path, os.waitstatus_to_exitcode(status))


def _load_isolation() -> ModuleType:
    """isolation.py, loaded by its path: no folder of envhub's goes on the sys.path its servers inherit."""
    spec = importlib.util.spec_from_file_location("envhub_isolation", ISOLATION)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def main() -> None:
    global _isolation
    _isolation = _load_isolation()
    signal.signal(signal.SIGCHLD, _reap)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # envhub's Ctrl-C is for envhub; EOF ends the zygote
    for name in PRELOAD:
        with contextlib.suppress(ImportError):  # a server that needs it fails with its own message
            importlib.import_module(name)
    gc.freeze()  # keep preloaded objects out of collections, so forked servers share their pages
    _reply({"ready": True, "threads": _threads()})
    for line in sys.stdin.buffer:
        try:
            request = ServerRequest(**json.loads(line))
        except (TypeError, ValueError) as exc:
            _reply({"error": f"bad request: {exc}"})
            continue
        threads = _threads()
        if threads != 1:
            _reply({"error": f"the zygote has {threads} threads, and forking it is unsafe"})
            continue
        # SIGCHLD waits until the new pid is known: a server that ends at once is still noted.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        try:
            pid = os.fork()
        except OSError as exc:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            _reply({"error": f"fork failed: {exc}"})
            continue
        if pid == 0:
            _serve(request)
        _LOGS[pid] = request.log
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        _reply({"pid": pid})


def _reply(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _serve(request: ServerRequest) -> NoReturn:
    """In the forked child: become the server a fresh `python -m uvicorn` would have been."""
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        _LOGS.clear()
        output = os.open(request.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        if request.name:
            with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:
                comm.write(request.name[:15])
        assert _isolation is not None
        limits = _isolation.Limits(**request.limits)
        if request.hidden:
            _isolation.own_view(request.hidden, request.shown, limits.disk, lambda: _drop(request))
        limits.apply()
        _drop(request)
        if request.hidden:
            _isolation.die_with_parent()
        os.chdir(request.cwd)
        os.environ.clear()
        os.environ.update(request.env)
        sys.path[:0] = [request.cwd, *request.path]  # as `python -m` with PYTHONPATH would have it
        sys.argv = ["uvicorn", request.app]
        import uvicorn

        uvicorn.run(
            request.app, host="127.0.0.1", port=request.port, ws_max_size=WS_MAX_SIZE, root_path=request.root_path
        )
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _drop(request: ServerRequest) -> None:
    """Become the server's user for good (real, effective and saved ids), with no other group, before anything of
    the environment runs: its log is open already, and what it reads it reads as that user."""
    if request.uid is not None and request.gid is not None:
        os.setgroups([])
        os.setgid(request.gid)
        os.setuid(request.uid)


# -- envhub's side


class Zygote:
    """The parent side: starts the zygote on first use and asks it for servers.

    `spawn` returns None whenever the zygote cannot serve (failed to start, crashed,
    refused); the caller then starts the server from scratch, so nothing is lost.
    After a zygote dies, one launch starts from scratch and the next starts a new zygote;
    one that fails to start is not tried again.
    """

    def __init__(
        self,
        work_dir: Path,
        env: dict[str, str],
        *,
        ready_timeout_s: float = 120,
        wrap: Wrapper | None = None,
        python: str = sys.executable,
        name: str = "zygote",
    ) -> None:
        """wrap: what the zygote's command and variables become as they are started (a view of bubblewrap's), and
        the descriptors the process inherits (closed here once it has them). python: the interpreter it preloads
        (envhub's, or a virtualenv's layered on envhub's packages); name: its log's."""
        self.work_dir = work_dir.resolve()  # it runs in that folder, so relative paths would point elsewhere
        self.env = env
        self.python = python
        self.name = name
        self.ready_timeout_s = ready_timeout_s
        self.wrap = wrap
        self.broken: str | None = None  # why the zygote is not used, once it failed to start
        self._process: subprocess.Popen[bytes] | None = None
        self._starting: subprocess.Popen[bytes] | None = None  # the zygote importing, before it says it is ready
        self._closed = False
        self._buffer = b""
        self._lock = threading.Lock()

    @property
    def log_path(self) -> Path:
        return self.work_dir / f"{self.name}.log"

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def spawn(self, request: ServerRequest) -> int | None:
        """The pid of a server forked for the request, or None to start it from scratch."""
        with self._lock:
            if self.broken is not None or self._closed:
                return None
            if self._process is not None and self._process.poll() is not None:
                log.warning("the zygote exited with code %s; see %s", self._process.returncode, self.log_path)
                self._discard()  # it crashed: this launch starts from scratch, the next one starts a zygote
                return None
            if self._process is None:
                self._start()
                if self.broken is not None:
                    return None
            try:
                reply = self._ask(asdict(request), timeout_s=60)  # a fork takes milliseconds; this is a stuck zygote
            except (OSError, ValueError):
                reply = {}
            pid = reply.get("pid")
            if not isinstance(pid, int):
                self._discard()  # crashed or refused: the next launch gets a fresh one
                return None
        return pid

    def warm(self) -> None:
        """Start the zygote if it is not running (and has not failed to start)."""
        with self._lock:
            if self.broken is None and not self._closed and (self._process is None or self._process.poll() is not None):
                self._start()

    def close(self) -> None:
        """End the zygote; one still importing is killed rather than waited for (it has forked nothing yet)."""
        self._closed = True
        starting = self._starting
        if starting is not None:
            _kill(starting)
        with self._lock:
            self._discard()

    def _start(self) -> None:
        self._discard()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        command = [self.python, "-P", SCRIPT, str(self.work_dir)]  # -P: no script folder on sys.path
        env = self.env | ONE_THREAD | {"PYTHONUNBUFFERED": "1"}
        fds: list[int] = []
        with self.log_path.open("ab") as stderr, contextlib.suppress(OSError):
            if self.wrap is not None:
                command, env, fds = self.wrap(command, env)
            try:
                self._process = subprocess.Popen(
                    command,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    cwd=self.work_dir,
                    pass_fds=fds,
                    start_new_session=True,  # signals to envhub's group are not for it
                )
            finally:
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
        self._starting = self._process
        try:
            if self._closed and self._process is not None:
                _kill(self._process)  # closed just now: close() may not have seen it
            if self._process is None:
                raise OSError(f"{self.python} could not be started")
            ready = self._read(timeout_s=self.ready_timeout_s)
        except (OSError, ValueError) as exc:
            ready = {"error": str(exc)}
        finally:
            self._starting = None
        if self._closed:
            self._discard(kill=True)  # closed while it started
            return
        if ready.get("ready") is not True or ready.get("threads") != 1:
            self.broken = f"the zygote did not start: {ready}; see {self.log_path}"
            log.warning("%s; process servers start from scratch", self.broken)
            self._discard(kill=True)

    def _ask(self, message: dict[str, Any], *, timeout_s: float) -> dict[str, Any]:
        process = self._process
        assert process is not None and process.stdin is not None
        process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()
        return self._read(timeout_s=timeout_s)

    def _read(self, *, timeout_s: float) -> dict[str, Any]:
        process = self._process
        assert process is not None and process.stdout is not None
        fd = process.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"the zygote did not answer within {timeout_s:g} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ConnectionError("the zygote exited")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def _discard(self, *, kill: bool = False) -> None:
        """Close the control pipe (the zygote exits on its EOF) and reap the process."""
        process, self._process, self._buffer = self._process, None, b""
        if process is None:
            return
        if kill:
            _kill(process)
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _kill(process)
            process.wait()


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Kill the zygote's process group: the zygote, and bubblewrap when the zygote runs in a view (the servers it
    forked lead groups of their own)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        with contextlib.suppress(OSError):
            process.kill()


if __name__ == "__main__":
    main()
