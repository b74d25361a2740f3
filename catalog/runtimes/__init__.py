"""Launch backends: each starts an environment somewhere and hands back the URL it answers on."""

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from catalog.models import EnvironmentDetail
from catalog.runtimes.zygote import EXIT_NOTE, note_exit
from core.errors import LaunchError
from hosting.models import Backend

__all__ = [
    "EXIT_NOTE",
    "LaunchSpec",
    "Launched",
    "Report",
    "Runtime",
    "death_note",
    "log_tail",
    "note_exit",
    "serve_when_healthy",
    "wait_healthy",
]

Report = Callable[[str], None]


@dataclass(frozen=True)
class LaunchSpec:
    endpoint_id: str
    environment: EnvironmentDetail
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)  # variables and secrets for the server
    options: dict[str, Any] = field(default_factory=dict)  # the backend's own, already checked
    token: str | None = field(default=None, repr=False)  # the launching user's Hub token; never in a handle in clear
    # The path the gateway serves the server under (/endpoints/<id>): its ASGI root_path, where the backend can
    # set it, so that pages building absolute URLs (openenv's gradio UI at /web) point back through the gateway.
    root_path: str = ""


@dataclass(frozen=True)
class Launched:
    url: str  # where envhub reaches the server; the gateway proxies to it
    handle: dict[str, Any]  # what stop() and is_running() need, kept in the database


class Runtime(Protocol):
    name: Backend

    def check(
        self, environment: EnvironmentDetail, options: dict[str, Any], token: str | None = None
    ) -> dict[str, Any]:
        """The options this backend takes, validated; raises InvalidInputError with the reason.

        token is the launching user's Hub token, for a backend that acts on the Hub as them.
        """
        ...

    def start(self, spec: LaunchSpec, report: Report) -> Launched:
        """Start and wait until /health answers; raises LaunchError (with the log tail) otherwise."""
        ...

    def stop(self, handle: dict[str, Any]) -> None: ...

    def is_running(self, handle: dict[str, Any]) -> bool: ...

    def auth_headers(self, handle: dict[str, Any]) -> dict[str, str]:
        """Headers the gateway adds to reach the server (a private Space needs a token)."""
        ...

    def managed_endpoints(self) -> set[str]:
        """Ids of the endpoints this backend holds a server for now, whatever the database says."""
        ...

    def sweep(self, live_replicas: set[str]) -> None:
        """Remove what replicas no longer alive started ahead of launches (servers no endpoint holds)."""
        ...

    def close(self) -> None:
        """Release what the backend holds in envhub's process; servers are left as they are."""
        ...


def log_tail(path: Path | None, lines: int = 40) -> list[str]:
    """The last lines of a log file, decoded leniently."""
    if path is None or not path.is_file():
        return []
    with path.open("rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - 64 * 1024))
        text = handle.read().decode("utf-8", errors="replace")
    return text.splitlines()[-lines:]


_ERROR_LINE = re.compile(r"(?i)(error|exception|traceback|fatal|critical|killed|panic|abort)")


def last_error_line(lines: list[str]) -> str | None:
    """The last line of a log that reads as an error (a traceback's final line, say), without envhub's own notes."""
    for line in reversed(lines):
        text = line.strip()
        if text and not text.startswith((EXIT_NOTE, "INFO:")) and _ERROR_LINE.search(text):
            return text[:300]
    return None


def death_note(log_path: Path | None, *, wait_s: float = 1.0) -> str:
    """Why a server stopped, from its log: how it ended, as its runtime noted there, and its last error line.

    The note is written as the server is reaped, a moment after it is seen gone: wait for it briefly.
    """
    deadline = time.monotonic() + wait_s
    while True:
        tail = log_tail(log_path, 60)
        ended = next((line[len(EXIT_NOTE) :] for line in reversed(tail) if line.startswith(EXIT_NOTE)), None)
        if ended is not None or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    message = "the server stopped unexpectedly" + (f": it {ended}" if ended else "")
    error = last_error_line(tail)
    return message + (f"; last error: {error}" if error else "")


def wait_healthy(
    url: str,
    *,
    timeout_s: float,
    alive: Callable[[], bool],
    what: str,
    log_path: Path | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    """Poll GET {url}/health until it answers 200, the server dies, or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2, headers=headers) as client:
        while True:
            if not alive():
                raise LaunchError(f"{what} exited before it answered /health" + _tail_note(log_path))
            try:
                if client.get(f"{url}/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise LaunchError(f"{what} did not answer GET /health within {timeout_s:g} s" + _tail_note(log_path))
            time.sleep(0.1)


def serve_when_healthy(
    runtime: "Runtime", launched: Launched, *, timeout_s: float, what: str, log_path: Path
) -> Launched:
    """The launched server once it answers /health; stopped (and the LaunchError raised) when it never does."""
    try:
        wait_healthy(
            launched.url,
            timeout_s=timeout_s,
            alive=lambda: runtime.is_running(launched.handle),
            what=what,
            log_path=log_path,
        )
    except LaunchError:
        runtime.stop(launched.handle)
        raise
    return launched


def _tail_note(log_path: Path | None) -> str:
    tail = log_tail(log_path, 12)
    return "; last log lines:\n" + "\n".join(tail) if tail else ""
