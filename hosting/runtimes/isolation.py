"""What each process server is held to: its limits (pids, memory, disk, CPU share), and for a server the zygote
forks in a view, processes, mounts and a /tmp of its own.

Standard library only: the zygote runs as a script with none of envhub's folders on its sys.path (a server's own
modules come first there), and loads this file by its path.
"""

import ctypes
import os
import resource
import shutil
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

__all__ = ["Limits", "die_with_parent", "own_view"]

_MIB = 1024 * 1024
_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWPID = 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_PR_SET_PDEATHSIG = 1
_TMP = "/tmp"  # noqa: S108 (a tmpfs of the server's own)
_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class Limits:
    """What a process server may use; the kernel holds each of its processes to them (see the README's Security)."""

    memory: int = 4096 * _MIB  # RLIMIT_DATA: the heap and private mappings of each process
    pids: int = 4096  # RLIMIT_NPROC: processes and threads of the user it runs as
    disk: int = 1024 * _MIB  # RLIMIT_FSIZE: the largest file it writes; also the size of its /tmp
    nice: int = 10  # its CPU share: envhub, at 0, comes first when the CPUs are busy

    def command(self, argv: Sequence[str]) -> list[str]:
        """argv started under the limits: what a server started from scratch runs."""
        nice, prlimit = shutil.which("nice") or "nice", shutil.which("prlimit") or "prlimit"
        held = [f"--data={self.memory}", f"--nproc={self.pids}", f"--fsize={self.disk}"]
        return [nice, "-n", str(self.nice), prlimit, *held, "--", *argv]

    def apply(self) -> None:
        """Hold this process (a forked server) to the limits, as command does a new one."""
        os.nice(self.nice)
        held = {resource.RLIMIT_DATA: self.memory, resource.RLIMIT_NPROC: self.pids, resource.RLIMIT_FSIZE: self.disk}
        for which, value in held.items():
            resource.setrlimit(which, (value, value))


def own_view(hidden: Sequence[str], shown: Sequence[str], tmp_bytes: int, drop: Callable[[], None]) -> None:
    """Processes, mounts and a /tmp of the caller's own (it is root in the zygote's view), in which the folders
    `hidden` are empty but for what of `shown` they hold; then a fork. Returns in the child, pid 1 of the new
    processes, with a /proc that shows them alone; the caller drops its privileges (drop), waits for the child and
    ends as it ends, so that whoever watches the caller's pid sees the server's exit."""
    _check(_libc.unshare(_CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC), "unshare")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing mounted here reaches the zygote or other servers
    # Its own /tmp first: what it is shown there (a template folder, say) is shown again on it.
    in_tmp = [path for path in [*hidden, *shown] if _within(path, _TMP)]
    _cover(_TMP, in_tmp, f"mode=1777,size={tmp_bytes}")
    for folder in hidden:
        _cover(folder, [path for path in shown if _within(path, folder)], "mode=0755,size=1m")
    pid = os.fork()
    if pid == 0:
        _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        return
    drop()
    _end_as(pid)


def die_with_parent() -> None:
    """Be killed when the process that waits for this one dies: the server (pid 1 of its processes) takes all it
    started along, even what left its process group. Set after the user changes, which clears it."""
    _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")


def _cover(folder: str, kept: list[str], options: str) -> None:
    """An empty tmpfs (of these options) over `folder`, with the kept paths inside it shown again as they are
    (read-only stays so)."""
    outermost = sorted(path for path in kept if not any(_within(path, other) and path != other for other in kept))
    found = {path: os.open(path, os.O_PATH) for path in outermost if os.path.isdir(path)}
    read_only = {path for path in found if os.statvfs(path).f_flag & os.ST_RDONLY}
    _mount("tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV, options)
    for path, fd in found.items():
        os.makedirs(path, mode=0o755, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC)  # the folder as it was, before the cover
        if path in read_only:
            _mount(None, path, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY)
        os.close(fd)


def _end_as(pid: int) -> NoReturn:
    """Wait for the server and end as it ended: its exit code, or the signal that killed it."""
    for name in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(name, signal.SIG_IGN)  # the server, in this process group, is sent them too
    while True:
        try:
            status = os.waitpid(pid, 0)[1]
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code if code >= 0 else 1)


def _within(path: str, folder: str) -> bool:
    return os.path.commonpath([path, folder]) == folder


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    encoded = [value.encode() if value is not None else None for value in (source, target, kind, data)]
    _check(_libc.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]), f"mount {target}")


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
