"""Time as envhub stores it (aware datetimes in UTC), and the clock that reads it: the system's, or a test's."""

import threading
from datetime import UTC, datetime
from typing import Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock", "as_utc", "utcnow"]


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """A datetime read back from the database: SQLite returns them without their zone; they were written in UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class Clock(Protocol):
    """What code that waits or expires things reads the time from, so that a test can move it."""

    def now(self) -> datetime:
        """The time now, aware, in UTC."""
        ...

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        """Wait `seconds` of this clock's time, or until `stop` is set; True when it was set."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return utcnow()

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        return stop.wait(seconds)


SYSTEM_CLOCK = SystemClock()
