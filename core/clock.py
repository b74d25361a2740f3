"""Time as envhub stores it: aware datetimes in UTC."""

from datetime import UTC, datetime

__all__ = ["as_utc", "utcnow"]


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """A datetime read back from the database: SQLite returns them without their zone; they were written in UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
