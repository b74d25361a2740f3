"""Servers as operating-system processes: which one a pid is, and stopping a whole process group."""

import logging
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from core.errors import LaunchError

__all__ = ["STOP_GRACE_S", "Gate", "end_group", "environ_names", "free_port", "resident_bytes", "started_at"]

log = logging.getLogger(__name__)

STOP_GRACE_S = 5  # how long a server has to exit after SIGTERM, before SIGKILL
_LOWEST_PORT = 20000  # free_port draws from here up to the ephemeral range


def free_port() -> int:
    """A loopback port nothing listens on, for a server to bind a moment later. It is drawn below the range the
    kernel hands to outgoing connections: a port from that range may be taken as a connection's own in between
    (on a busy machine it was, and the server failed with "address already in use")."""
    band = range(_LOWEST_PORT, _ephemeral_ports()[0])
    for _ in range(50 if len(band) >= 1000 else 0):
        port = random.choice(band)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # that band is full: any port the kernel gives
        sock.bind(("127.0.0.1", 0))
        given: int = sock.getsockname()[1]
        return given


def _ephemeral_ports() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def started_at(pid: int) -> str | None:
    """When a live process started: the boot and the clock tick since it; with the pid it names one process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    if fields[0] in ("Z", "X"):
        return None  # exited, waiting to be reaped
    return f"{boot}/{fields[19]}"


def resident_bytes(pid: int) -> int | None:
    """The memory a live process holds (its resident set); None when it is gone or /proc cannot tell."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    line = next((line for line in status.splitlines() if line.startswith("VmRSS:")), None)
    return int(line.split()[1]) * 1024 if line is not None else None  # the kernel writes kB


def environ_names(pid: int, assignment: str) -> bool:
    """Whether a process's environment holds NAME=value exactly."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return assignment.encode() in environ.split(b"\0")


def end_group(pgid: int, *, grace_s: float = STOP_GRACE_S, reap: Callable[[], object] | None = None) -> None:
    """Stop a server and everything in its process group: SIGTERM, then SIGKILL for what is left after the grace.

    A server that exits at once may leave a helper behind that ignores SIGTERM; it is killed too.
    reap collects the server's exit when envhub is its parent (else the zygote or init does).
    """
    if pgid <= 0:
        return  # never killpg(0): that is envhub's own process group
    for sent, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
        try:
            os.killpg(pgid, sent)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if reap is not None:
                reap()
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.02)
    log.warning("process group %d is still there after SIGKILL", pgid)


class Gate:
    """Servers being started, until they are known to whoever stops them: closing waits for those under way, and
    no start passes after it."""

    def __init__(self) -> None:
        self._closed = False
        self._under_way = 0
        self._changed = threading.Condition()

    @contextmanager
    def passage(self) -> Iterator[None]:
        """Start a server within; LaunchError once closed."""
        with self._changed:
            if self._closed:
                raise LaunchError("envhub is stopping: the server was not started")
            self._under_way += 1
        try:
            yield
        finally:
            with self._changed:
                self._under_way -= 1
                self._changed.notify_all()

    def close(self, timeout_s: float) -> None:
        with self._changed:
            self._closed = True
            self._changed.wait_for(lambda: self._under_way == 0, timeout=timeout_s)
