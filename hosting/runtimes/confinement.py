"""What keeps process servers from envhub: the unprivileged user they run as, homes of their own, envhub's data
folder closed to them, and bubblewrap's views of the machine (views.py).

When envhub runs as root, process servers run as the user ENVHUB_PROCESS_USER names (`envhub-env`, a system user
made when it is missing), with no other group and no capability: the zygote drops to it in each server it forks
before anything of the environment runs, and a server started from scratch starts as it. envhub's data folder
is closed to that user (it may pass through to the runtime folder, which servers run from, but not list it; the
database, logs and datasets are envhub's alone), and a snapshot, a virtualenv or a template stays readable. When
bubblewrap is installed the servers also see the machine only through a view: the system, Python and their own
folders, so the data folder is not even there for them. When envhub does not run as root, there is nobody to
drop to: servers run as envhub's own user, as it logs once.

A sandboxed server (with sign-in on, every process launch but the admin's) always runs in a view, with a network
and processes of its own; without bubblewrap such a launch is refused (see ProcessRuntime.check).
"""

import json
import logging
import os
import pwd
import select
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.errors import LaunchError
from hosting.runtimes.logs import tail_note
from hosting.runtimes.venvs import envhub_site_packages
from hosting.runtimes.views import View, Wrapped, bubblewrap, wrap

__all__ = ["SERVER_USER", "Confinement", "ServerUser"]

log = logging.getLogger(__name__)

SERVER_USER = "envhub-env"
_INFO_TIMEOUT_S = 30  # bubblewrap tells the server's pid as soon as it has set the view up


@dataclass(frozen=True)
class ServerUser:
    name: str
    uid: int
    gid: int


class Confinement:
    """How one process runtime keeps its servers from envhub (see the module docstring)."""

    def __init__(self, work_dir: Path, user: str = SERVER_USER, *, closed: Sequence[Path] = ()) -> None:
        """work_dir: the runtime's folder, which servers run from; user: who they run as when envhub is root
        ("" for envhub's own user); closed: envhub's folders and files that servers must not read."""
        self.work_dir = work_dir.resolve()
        self.user_name = user
        self.closed = [path.resolve() for path in closed]
        self._lock = threading.Lock()
        self._user: ServerUser | None = None
        self._resolved = False

    @property
    def homes(self) -> Path:
        return self.work_dir / "homes"

    @property
    def as_root(self) -> bool:
        return os.geteuid() == 0

    def user(self) -> ServerUser | None:
        """The user servers run as; None when they run as envhub's own (envhub is not root, or the setting is "")."""
        with self._lock:
            if not self._resolved:
                self._user = _server_user(self.user_name)
                self._resolved = True
            return self._user

    def bubblewrap(self) -> str | None:
        return bubblewrap(as_root=self.as_root)

    def viewed(self, sandbox: bool) -> bool:
        """Whether a server runs in a view of bubblewrap's: a sandboxed one always; one that drops to the servers'
        user whenever bubblewrap is there (it then sees Python wherever it is installed, and none of envhub's)."""
        return sandbox or (self.user() is not None and self.bubblewrap() is not None)

    def prepare(self) -> None:
        """Before a server starts: the homes folder, and envhub's own folders closed to the servers' user."""
        self.homes.mkdir(parents=True, exist_ok=True)
        self.homes.chmod(0o711)  # each home is its server's; the folder is only passed through
        if self.user() is None:
            return  # servers run as envhub does: a mode would keep nothing from them
        self.work_dir.chmod(0o755)
        for path in self.closed:
            _close(path, keep=self.work_dir)

    def home(self, server_id: str) -> Path:
        """A new, empty home folder of the server's own."""
        home = self.homes / server_id
        shutil.rmtree(home, ignore_errors=True)  # what a server of that id left behind
        home.mkdir(mode=0o700)
        user = self.user()
        if user is not None:
            os.chown(home, user.uid, user.gid)
        return home

    def release(self, server_id: str) -> None:
        shutil.rmtree(self.homes / server_id, ignore_errors=True)

    @staticmethod
    def python_folders(python: str) -> list[Path]:
        """What a view shows of Python: envhub's installation and packages, and the virtualenv of `python`."""
        folders = [Path(sys.base_prefix), Path(sys.base_exec_prefix), Path(sys.prefix)]
        folders += [Path(folder) for folder in envhub_site_packages()]
        if python != sys.executable:
            folders.append(Path(python).parent.parent)  # its virtualenv, layered on envhub's packages
        return folders

    def popen(self, argv: list[str], env: dict[str, str], cwd: Path, log_path: Path) -> subprocess.Popen[bytes]:
        """A server started from scratch on the machine itself, as the servers' user when there is one."""
        user = self.user()
        with log_path.open("ab") as output:
            try:
                return subprocess.Popen(
                    argv,
                    cwd=cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group, stopped as a whole
                    user=user.uid if user is not None else None,
                    group=user.gid if user is not None else None,
                    extra_groups=[] if user is not None else None,
                )
            except PermissionError as exc:
                who = user.name if user is not None else "envhub's user"
                raise LaunchError(
                    f"{who} may not start the server in {cwd} ({exc.strerror}): let it read Python and the "
                    "environment's folder, or install bubblewrap, which shows them to it"
                ) from exc

    def start(
        self,
        view: View,
        argv: list[str],
        env: dict[str, str],
        cwd: Path,
        log_path: Path,
        keep_fds: Sequence[int] = (),
    ) -> tuple[subprocess.Popen[bytes], int]:
        """A server started from scratch in the view; bubblewrap's process, and the server's own pid.

        bubblewrap stays the server's parent and ends when it ends (with its exit code, or 128 + the signal).
        """
        bwrap = self.bubblewrap()
        if bwrap is None:
            raise LaunchError("this server runs in a sandbox, and this machine has no bubblewrap to make one")
        user = self.user()
        info, info_write = os.pipe()
        wrapped = wrap(
            bwrap,
            view,
            argv,
            env,
            cwd=cwd,
            drop_to=(user.uid, user.gid) if user is not None else None,
            info_fd=info_write,
            as_root=self.as_root,
        )
        try:
            with log_path.open("ab") as output:
                child = subprocess.Popen(
                    wrapped.argv,
                    env=wrapped.env,
                    pass_fds=[*wrapped.fds, *keep_fds],
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        finally:
            wrapped.close()
        pid = _child_pid(info)
        if pid is None:
            child.kill()
            child.wait()
            raise LaunchError("bubblewrap could not start the server" + tail_note(log_path))
        return child, pid

    def wrap_zygote(self, view: View, argv: list[str], env: dict[str, str]) -> Wrapped | None:
        """The zygote in a view, when servers run in views (it stays root there, and drops in each server it
        forks), in bubblewrap's process group; None when it runs on the machine itself."""
        bwrap = self.bubblewrap()
        if not self.viewed(sandbox=False) or bwrap is None:
            return None
        return wrap(bwrap, view, argv, env, cwd=self.work_dir, new_session=False, as_root=self.as_root)


def _server_user(name: str) -> ServerUser | None:
    if os.geteuid() != 0:
        log.info(
            "envhub runs as uid %d, not root: process servers run as that same user (none to drop to)", os.geteuid()
        )
        return None
    if not name:
        log.warning("ENVHUB_PROCESS_USER is empty: process servers run as root, as envhub does")
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        entry = _create_user(name)
    if entry.pw_uid == 0:
        raise LaunchError(f"the process servers' user {name} is root: set ENVHUB_PROCESS_USER to an unprivileged user")
    log.info("process servers run as %s (uid %d)", name, entry.pw_uid)
    return ServerUser(name, entry.pw_uid, entry.pw_gid)


def _create_user(name: str) -> pwd.struct_passwd:
    """A system user with no login, no home and a group of its own."""
    useradd = shutil.which("useradd")
    advice = f"create a system user {name}, or set ENVHUB_PROCESS_USER to an unprivileged user"
    if useradd is None:
        raise LaunchError(f"there is no user {name} to run process servers as, and no useradd to make one: {advice}")
    argv = [useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent"]
    done = subprocess.run([*argv, "--shell", "/usr/sbin/nologin", name], capture_output=True, text=True, timeout=60)
    try:
        entry = pwd.getpwnam(name)  # made now, or by another envhub at the same moment
    except KeyError:
        raise LaunchError(f"could not create the user {name} ({done.stderr.strip()}): {advice}") from None
    log.info("created the system user %s (uid %d) to run process servers as", name, entry.pw_uid)
    return entry


def _close(path: Path, *, keep: Path) -> None:
    """Take the servers' user's access away from path, but for the folders on the way to keep and keep itself."""
    if path.is_symlink() or not path.exists():
        return
    if not path.is_dir() or not keep.is_relative_to(path):
        for closed in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            _shut(closed)
        return
    if path != keep:
        path.chmod(0o711)  # passed through on the way to keep, never listed
        for entry in path.iterdir():
            _close(entry, keep=keep)


def _shut(path: Path) -> None:
    """No access for the group and others (a SQLite journal beside a database, too)."""
    try:
        if path.is_symlink():
            return
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            path.chmod(mode & ~0o077)
    except OSError:
        pass  # gone meanwhile


def _child_pid(info: int) -> int | None:
    """The server's pid, as bubblewrap writes it to its info descriptor (then closed); None when it says nothing."""
    data = b""
    deadline = time.monotonic() + _INFO_TIMEOUT_S
    try:
        while (left := deadline - time.monotonic()) > 0 and select.select([info], [], [], left)[0]:
            chunk = os.read(info, 4096)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(info)
    try:
        pid = json.loads(data)["child-pid"]
    except (ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) else None
