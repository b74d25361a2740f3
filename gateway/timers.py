"""The gateway's clock: monotonic seconds, and callbacks after a delay on the event loop; the loop's own, or a
test's that moves only when the test moves it."""

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["LOOP_TIMERS", "Cancellable", "LoopTimers", "Timers"]


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Timers(Protocol):
    """What the relay reads the time from and schedules its pings with."""

    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def later(self, delay_s: float, callback: Callable[[], None]) -> Cancellable:
        """Run callback on the running event loop once delay_s of this clock's time have passed."""
        ...


class LoopTimers:
    def now(self) -> float:
        return time.monotonic()

    def later(self, delay_s: float, callback: Callable[[], None]) -> Cancellable:
        return asyncio.get_running_loop().call_later(delay_s, callback)


LOOP_TIMERS = LoopTimers()
