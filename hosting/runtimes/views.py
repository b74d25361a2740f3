"""A process server's view of the machine, built by bubblewrap: the folders it sees, its network, its processes.

A view shows the system's folders (/usr and /etc, read-only), a /dev of its own, an empty /tmp (in memory, of
the size it says), and then only the folders it lists: read-only ones (Python's, the environment's) and writable
ones (the server's home). The folders on the way to a listed one are made for the view and may be entered, so a
server whose user could not enter them on the machine itself (Python installed under /root, say) still reaches
what it needs, and nothing beside it: not envhub's data folder, its database or its logs. A server's view has its
own processes, and a /proc that shows them alone (the zygote's does not: each server it forks makes its own, see
isolation.py). A sandboxed view also has a network of its own (only a loopback nobody else reaches; the server is
handed its listening socket).

bubblewrap reads its arguments from a memory file, so that what it is given (variables, secrets) is not on
its command line for `ps` to show, and starts the command from a script in the view, so that the command's
arguments show on the command's own process alone; the command finds its own variables only.
"""

import contextlib
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SYSTEM_LINKS", "TMP_BYTES", "View", "Wrapped", "bubblewrap", "wrap"]

SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # merged into /usr on most systems now
TMP_BYTES = 512 * 1024 * 1024  # of a view's /tmp, unless it says
_COMMAND = "/.envhub-command"  # in the view: the script that starts the command
_TMP = Path("/tmp")  # noqa: S108 (a tmpfs of the view's own, not the machine's /tmp)


@dataclass(frozen=True)
class View:
    read: tuple[Path, ...] = ()  # shown read-only, at the same paths
    write: tuple[Path, ...] = ()  # shown writable (as far as their owners and modes let the server write)
    sandboxed: bool = False  # a network of its own (a loopback alone)
    own_processes: bool = True  # a process tree, and a /proc that shows it alone (a sandboxed view always has)
    tmp_bytes: int = TMP_BYTES


@dataclass
class Wrapped:
    """A command as bubblewrap runs it: what to start, its variables, and the descriptors it must inherit."""

    argv: list[str]
    env: dict[str, str]
    fds: list[int] = field(default_factory=list)

    def close(self) -> None:
        """Close the parent's copies of the descriptors, once the child has them."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)


_probed: dict[bool, str | None] = {}


def bubblewrap(*, as_root: bool) -> str | None:
    """bubblewrap's path when it is installed and makes namespaces here (a container may forbid it), else None."""
    if as_root in _probed:
        return _probed[as_root]
    found = shutil.which("bwrap")
    if found is not None:
        argv = [found, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", *_sandbox_flags(as_root=as_root)]
        try:
            done = subprocess.run([*argv, "--", "true"], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            found = None
        else:
            found = found if done.returncode == 0 else None
    _probed[as_root] = found
    return found


def _sandbox_flags(*, as_root: bool) -> list[str]:
    return [*_own_users(as_root), "--unshare-net", *_OWN_PROCESSES, "--unshare-uts", "--unshare-cgroup-try"]


def _own_users(as_root: bool) -> list[str]:
    # As root the server's user is changed inside (setpriv), which needs the machine's own users; otherwise a
    # user namespace is what lets bubblewrap make the others.
    return [] if as_root else ["--unshare-user"]


_OWN_PROCESSES = ["--unshare-pid", "--unshare-ipc", "--as-pid-1"]  # the command is pid 1: it ends, all end


def wrap(
    bwrap: str,
    view: View,
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: Path,
    drop_to: tuple[int, int] | None = None,
    info_fd: int | None = None,
    keep_fds: Iterable[int] = (),
    as_root: bool = True,
    new_session: bool = True,
) -> Wrapped:
    """The command run in the view, with env as its whole environment, in a session of its own (new_session: its
    pid is then its process group's, which stops it and what it starts) or in bubblewrap's.

    drop_to: (uid, gid) the command runs as, with no other groups and no capabilities (envhub runs as root).
    info_fd: where bubblewrap writes the command's pid, as JSON ({"child-pid": N}).
    keep_fds: descriptors the command inherits (a listening socket).
    """
    args = ["--new-session", "--clearenv"] if new_session else ["--clearenv"]
    for name, value in env.items():
        args += ["--setenv", name, value]
    args += _system(view.tmp_bytes)
    args += _listed(view)
    args += ["--chdir", str(cwd)]
    if view.sandboxed:
        args += _sandbox_flags(as_root=as_root)
    elif view.own_processes:
        args += [*_own_users(as_root), *_OWN_PROCESSES]
    if info_fd is not None:
        args += ["--info-fd", str(info_fd)]
    inner = list(command)
    if drop_to is not None:
        uid, gid = drop_to
        setpriv = shutil.which("setpriv") or "setpriv"
        drop = [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all"]
        inner = [*drop, "--bounding-set=-all", "--", *inner]
    script = _memory_file("envhub-command", f"exec {shlex.join(inner)}\n".encode())
    args += ["--perms", "0444", "--ro-bind-data", str(script), _COMMAND]
    options = _memory_file("bwrap-args", b"".join(arg.encode() + b"\0" for arg in args))
    fds = [options, script, *keep_fds, *([info_fd] if info_fd is not None else [])]
    # The command runs from a file of the view's, so that its arguments show on its own process alone.
    return Wrapped([bwrap, "--args", str(options), "--", "/bin/sh", _COMMAND], {}, fds)


def _memory_file(name: str, content: bytes) -> int:
    """A file in memory, read from its start; close-on-exec, so only a child given it in pass_fds inherits it."""
    fd = os.memfd_create(name)
    os.write(fd, content)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _system(tmp_bytes: int) -> list[str]:
    """The system's own folders, read-only; a /proc (its own when its processes are), /dev and /tmp of the view's."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in SYSTEM_LINKS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    args += ["--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev"]
    # The view's own /tmp, empty, and as any /tmp writable by all; it is memory, so it is bounded.
    return [*args, "--size", str(tmp_bytes), "--perms", "1777", "--tmpfs", str(_TMP)]


def _listed(view: View) -> list[str]:
    """The view's own folders, parents before what they hold, each reached through folders made for the view."""
    shown = {Path("/usr"), Path("/etc"), *(Path(name) for name in SYSTEM_LINKS)}  # the machine's, as they are
    made = {_TMP, Path("/proc"), Path("/dev")}
    args: list[str] = []
    entries = [(path, "--ro-bind") for path in view.read] + [(path, "--bind") for path in view.write]
    for path, bind in sorted(_distinct(entries), key=lambda entry: len(entry[0].parts)):
        if any(path.is_relative_to(outer) for outer in shown) and bind == "--ro-bind":
            continue  # already shown, read-only, by a folder that holds it
        for parent in reversed(path.parents):
            if parent == Path("/") or parent in made or any(parent.is_relative_to(outer) for outer in shown):
                continue
            args += ["--perms", "0755", "--dir", str(parent)]
            made.add(parent)
        args += [bind, str(path), str(path)]
        shown.add(path)
    return args


def _distinct(entries: list[tuple[Path, str]]) -> list[tuple[Path, str]]:
    """Existing paths, resolved, each once (writable when listed both ways)."""
    found: dict[Path, str] = {}
    for path, bind in entries:
        if path.exists():
            resolved = path.resolve()
            found[resolved] = "--bind" if "--bind" in (bind, found.get(resolved)) else bind
    return list(found.items())
