"""A run's episodes step by step: each record is stored as it is played, its observation whole while the run's
storage budget lasts and cut to its start and digest past it, and read back a page at a time."""

import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, delete, func
from sqlmodel import Session, col, select

from evals.models import Episode, EpisodeStep
from protocol.observations import kept

__all__ = ["MAX_STORED_OBSERVATION", "Budget", "EpisodeSteps", "streamed"]

MAX_STORED_OBSERVATION = 256 * 1024  # characters of one observation a record keeps whole
PAGE = 16  # records read at once: a few MiB at most, however long the episode


@dataclass
class Budget:
    """What one run may store of its episodes' records, in bytes of JSON, and what it has stored; its episodes
    play at once, each storing from a thread of its own."""

    limit: int
    spent: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def spend(self, size: int, *, within: bool) -> bool:
        """Count `size` bytes stored; `within`: only if they fit, and say whether they did."""
        with self._lock:
            if within and self.spent + size > self.limit:
                return False
            self.spent += size
            return True


def _size(record: dict[str, Any]) -> int:
    return len(json.dumps(record, ensure_ascii=False, default=str).encode())


class EpisodeSteps:
    """The records of runs' episodes, one row each."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def write(self, episode_id: str, record: dict[str, Any], budget: Budget) -> None:
        """Store one record as played: its observation whole when the run's budget has room for it, else its start
        and digest (a cut record is small, and counts too)."""
        observation = record.get("observation")
        stored = {**record, "observation": kept(observation, MAX_STORED_OBSERVATION)}
        if not budget.spend(_size(stored), within=True):
            stored = {**record, "observation": kept(observation, 0)}
            budget.spend(_size(stored), within=False)
        with Session(self.engine) as session:
            session.add(EpisodeStep(episode=episode_id, index=record["index"], record=stored))
            session.commit()

    def drop(self, episode_ids: Iterable[str]) -> None:
        """Forget the records of episodes that will never be recorded (a cancelled run's unfinished ones)."""
        with Session(self.engine) as session:
            session.execute(delete(EpisodeStep).where(col(EpisodeStep.episode).in_(list(episode_ids))))
            session.commit()

    def page(self, episode: Episode, start: int, count: int = PAGE) -> list[dict[str, Any]]:
        """The episode's records from the `start`th on, at most `count`."""
        if episode.records:  # an agent session's episode, or one stored whole before runs were stored step by step
            return episode.records[start : start + count]
        statement = (
            select(EpisodeStep.record)
            .where(EpisodeStep.episode == episode.id, col(EpisodeStep.index) >= start)
            .order_by(col(EpisodeStep.index))
            .limit(count)
        )
        with Session(self.engine) as session:
            rows = session.exec(statement).all()
        return [dict(row) for row in rows]

    def count(self, episode: Episode) -> int:
        if episode.records:
            return len(episode.records)
        with Session(self.engine) as session:
            return session.exec(select(func.count()).where(EpisodeStep.episode == episode.id)).one()

    def records(self, episode: Episode) -> Iterator[dict[str, Any]]:
        """Every record of the episode, in order, read a page at a time."""
        start = 0
        while page := self.page(episode, start):
            yield from page
            start += len(page)


def streamed(head: dict[str, Any], records: Iterable[dict[str, Any]]) -> Iterator[str]:
    """`head` as one JSON object with `records` as its last member, written a record at a time."""
    opening = json.dumps(head, ensure_ascii=False, default=str)
    yield opening[:-1] + (', "records": [' if head else '"records": [')
    for n, record in enumerate(records):
        yield (", " if n else "") + json.dumps(record, ensure_ascii=False, default=str)
    yield "]}"
