"""A clock that moves only when a test moves it: leases expire and keepers wake when the test says, not after a
real wait."""

import threading
from datetime import datetime, timedelta

from core.clock import utcnow

__all__ = ["ManualClock"]


class ManualClock:
    """Starts at the real time now; `advance` moves it and wakes whatever waits past the new time."""

    def __init__(self) -> None:
        self._now = utcnow()
        self._moved = threading.Condition()
        self._waiting = 0

    @property
    def waiting(self) -> int:
        """How many threads wait on this clock now (a keeper between two rounds)."""
        with self._moved:
            return self._waiting

    def now(self) -> datetime:
        with self._moved:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._moved:
            self._now += timedelta(seconds=seconds)
            self._moved.notify_all()

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        with self._moved:
            until = self._now + timedelta(seconds=seconds)
            self._waiting += 1
            try:
                while self._now < until and not stop.is_set():
                    # `stop` is another's event and wakes no one here: look at it again soon.
                    self._moved.wait(timeout=0.05)
            finally:
                self._waiting -= 1
            return stop.is_set()
