"""Clocks that move only when a test moves them: leases expire, keepers wake and the gateway pings when the test
says, not after a real wait."""

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from core.clock import utcnow

__all__ = ["ManualClock", "ManualTimers"]


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


class ManualTimers:
    """The gateway's clock (gateway.timers) for a test: starts at the real monotonic time; `advance` moves it and
    runs, each on its event loop, the callbacks due by then, returning once they have run."""

    def __init__(self) -> None:
        self._now = time.monotonic()  # where hosting compares a replica's last word with its own clock, they agree
        self._lock = threading.Lock()
        self._timers: list[_Timer] = []

    def now(self) -> float:
        with self._lock:
            return self._now

    def later(self, delay_s: float, callback: Callable[[], None]) -> "_Timer":
        with self._lock:
            timer = _Timer(self._now + delay_s, callback, asyncio.get_running_loop())
            self._timers.append(timer)
        return timer

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
            due = sorted((t for t in self._timers if t.at <= self._now), key=lambda t: t.at)
            self._timers = [t for t in self._timers if t.at > self._now and not t.cancelled]
        for timer in due:
            if not timer.cancelled:
                timer.run()


class _Timer:
    def __init__(self, at: float, callback: Callable[[], None], loop: asyncio.AbstractEventLoop) -> None:
        self.at, self.callback, self.loop = at, callback, loop
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def run(self) -> None:
        """On its loop: at once when the caller runs on that loop, else there, waiting until it ran."""
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is self.loop:
            self.callback()
            return

        async def run() -> None:
            self.callback()

        asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=30)
