"""A server's log as envhub keeps it: its tail, how the server ended, and why, in a line a person reads."""

import re
import time
from pathlib import Path

from hosting.runtimes.zygote import EXIT_NOTE, note_exit

__all__ = ["EXIT_NOTE", "LIVENESS_QUERY", "death_note", "last_error_line", "log_tail", "note_exit", "tail_note"]

LIVENESS_QUERY = "probe=envhub-liveness"  # on envhub's /health probes of a replica: left out of the tail shown

_ERROR_LINE = re.compile(r"(?i)(error|exception|traceback|fatal|critical|killed|panic|abort)")


def log_tail(path: Path | None, lines: int = 40) -> list[str]:
    """The last lines of a log file, decoded leniently."""
    if path is None or not path.is_file():
        return []
    with path.open("rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - 64 * 1024))
        text = handle.read().decode("utf-8", errors="replace")
    return [line for line in text.splitlines() if LIVENESS_QUERY not in line][-lines:]


def tail_note(log_path: Path | None) -> str:
    """The last lines of a log, to end a message with."""
    tail = log_tail(log_path, 12)
    return "; last log lines:\n" + "\n".join(tail) if tail else ""


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
