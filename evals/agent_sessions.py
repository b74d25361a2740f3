"""Agent sessions on record: the MCP sessions agent harnesses play through endpoints' MCP doors, each with its
episodes, kept in the evaluations' episode table so that the episode viewer and the exports read them alike.

What they keep is bounded: a session's episodes within its budget of bytes, and the sessions of one client (a
signed-in user, else an address) within theirs, the episodes written longest ago let go first; and a recording is
read a few episodes at a time, never whole."""

import json
from collections import Counter
from collections.abc import Iterator

from sqlalchemy import ColumnElement, Engine, delete, func, update
from sqlmodel import Session, col, select

from core.clock import utcnow
from core.errors import NotFoundError
from evals.models import AgentSession, AgentSessionBase, Episode

__all__ = ["AgentSessions", "agent_episode_id"]

ENDED = "ended"
STOPPED = "envhub stopped while it was open"
READ_BYTES = 4 * 1024 * 1024  # episodes read at once, by their size (one at least, however large)
READ_ROWS = 64  # sizes of the next episodes looked at to choose them
LET_GO_ROWS = 256  # episodes looked at at a time when letting the oldest go


def agent_episode_id(session_id: str, index: int) -> str:
    """An agent session's episodes are named as a run's are: <session>-<index>, the viewer's share link id."""
    return f"{session_id}-{index}"


class AgentSessions:
    """The agent sessions' rows, written as the door plays them (this envhub process is `instance`)."""

    def __init__(
        self, engine: Engine, instance: str = "", session_bytes: int = 64 << 20, budget_bytes: int = 256 << 20
    ) -> None:
        self.engine = engine
        self.instance = instance
        self.session_bytes, self.budget_bytes = session_bytes, budget_bytes

    def open(self, row: AgentSession) -> None:
        row.instance = self.instance
        with Session(self.engine) as session:
            session.add(row)
            session.commit()

    def write_episode(self, episode: Episode) -> None:
        """Keep the episode as it stands now (its first records only, when it alone is past a budget), let the
        oldest episodes of its session, then of its client's sessions, go while they are past their budgets, and
        keep the figures of the sessions that changed over the episodes they keep."""
        _fit(episode, min(self.session_bytes, self.budget_bytes))
        with Session(self.engine) as session:
            session.merge(episode)
            session.flush()
            holder = session.exec(select(AgentSession.holder).where(AgentSession.id == episode.evaluation)).first()
            dropped = _let_go(session, col(Episode.evaluation) == episode.evaluation, self.session_bytes, episode.id)
            if holder is not None:
                dropped += _let_go(session, col(AgentSession.holder) == holder, self.budget_bytes, episode.id)
            for session_id in {episode.evaluation, *dropped}:
                _figure(session, session_id, dropped[session_id])
            session.commit()

    def end(self, session_id: str, reason: str, code: str) -> None:
        with Session(self.engine) as session:
            session.execute(
                update(AgentSession)
                .where(col(AgentSession.id) == session_id, col(AgentSession.status) != ENDED)
                .values(status=ENDED, message=reason, code=code, ended_at=utcnow())
            )
            session.commit()

    def end_orphans(self, live_instances: set[str]) -> int:
        """Sessions left open by envhub processes that are gone (their doors went with them) are ended."""
        with Session(self.engine) as session:
            rows = session.exec(
                select(AgentSession.id, AgentSession.instance).where(AgentSession.status != ENDED)
            ).all()
            orphans = [sid for sid, instance in rows if instance != self.instance and instance not in live_instances]
            if orphans:
                session.execute(
                    update(AgentSession)
                    .where(col(AgentSession.id).in_(orphans))
                    .values(status=ENDED, message=STOPPED, code="shutting_down", ended_at=utcnow())
                )
                session.commit()
        return len(orphans)

    def list_for(self, endpoint_id: str, limit: int = 100) -> list[AgentSessionBase]:
        statement = (
            select(AgentSession)
            .where(AgentSession.endpoint == endpoint_id)
            .order_by(col(AgentSession.created_at).desc())
            .limit(limit)
        )
        with Session(self.engine) as session:
            return [AgentSessionBase.model_validate(row.model_dump()) for row in session.exec(statement)]

    def endpoint_of(self, session_id: str) -> str | None:
        """The endpoint whose door played the agent session of that id, or None when no agent session has it."""
        with Session(self.engine) as session:
            row = session.get(AgentSession, session_id)
        return row.endpoint if row is not None else None

    def get(self, endpoint_id: str, session_id: str) -> AgentSession:
        with Session(self.engine, expire_on_commit=False) as session:
            row = session.get(AgentSession, session_id)
        if row is None or row.endpoint != endpoint_id:
            raise NotFoundError(
                f"endpoint {endpoint_id} has no agent session {session_id!r}; list them with "
                f"GET /api/endpoints/{endpoint_id}/sessions"
            )
        return row

    def episodes(self, session_id: str) -> Iterator[Episode]:
        """The session's episodes in order, read a few at a time (READ_BYTES of them, by their sizes)."""
        after = -1
        while True:
            with Session(self.engine) as session:
                sizes = session.exec(
                    select(Episode.index, Episode.size)
                    .where(Episode.evaluation == session_id, Episode.index > after)
                    .order_by(col(Episode.index))
                    .limit(READ_ROWS)
                ).all()
                if not sizes:
                    return
                last, total = sizes[0][0], 0
                for index, size in sizes:
                    total += size
                    if total > READ_BYTES and index != sizes[0][0]:
                        break
                    last = index
                rows = session.exec(
                    select(Episode)
                    .where(Episode.evaluation == session_id, Episode.index > after, Episode.index <= last)
                    .order_by(col(Episode.index))
                ).all()
            yield from rows
            after = last


def _size(episode: Episode) -> int:
    return len(episode.model_dump_json().encode())


def _fit(episode: Episode, limit: int) -> None:
    """Note the episode's size; one past `limit` keeps its first records that fit, and says how many it lost."""
    episode.size = _size(episode)
    if episode.size <= limit:
        return
    records, episode.records = episode.records, []
    room = limit - _size(episode) - 200  # what the note below adds to the episode
    fits = 0
    for record in records:
        room -= len(json.dumps(record, ensure_ascii=False, default=str).encode()) + 1
        if room < 0:
            break
        fits += 1
    note = f"{len(records) - fits} records past the recording's budget of {limit:,} bytes were not kept"
    episode.error = f"{episode.error}; {note}" if episode.error else note
    episode.records = records[:fits]
    episode.size = _size(episode)


def _let_go(session: Session, among: ColumnElement[bool], budget: int, spared: str) -> Counter[str]:
    """Delete the episodes written longest ago `among` agent sessions' (all but `spared`, the one just written)
    while they are past `budget` bytes together; how many each session lost."""
    sessions = col(Episode.evaluation) == col(AgentSession.id)
    total = session.exec(select(func.coalesce(func.sum(Episode.size), 0)).join(AgentSession, sessions).where(among))
    excess = int(total.one()) - budget
    lost: Counter[str] = Counter()
    while excess > 0:
        oldest = session.exec(
            select(Episode.id, Episode.evaluation, Episode.size)
            .join(AgentSession, sessions)
            .where(among, Episode.id != spared)
            .order_by(col(Episode.finished_at), col(Episode.index))
            .limit(LET_GO_ROWS)
        ).all()
        if not oldest:
            break
        gone = []
        for episode_id, session_id, size in oldest:
            if excess <= 0:
                break
            gone.append(episode_id)
            lost[session_id] += 1
            excess -= size
        session.execute(delete(Episode).where(col(Episode.id).in_(gone)))
    return lost


def _figure(session: Session, session_id: str, dropped: int) -> None:
    """The session's figures over the episodes it keeps, and the count of those it let go."""
    count, reward, steps = session.exec(
        select(
            func.count(),
            func.coalesce(func.sum(Episode.reward), 0.0),
            func.coalesce(func.sum(Episode.steps), 0),
        ).where(Episode.evaluation == session_id)
    ).one()
    session.execute(
        update(AgentSession)
        .where(col(AgentSession.id) == session_id)
        .values(
            episode_count=int(count),
            reward=float(reward),
            steps=int(steps),
            dropped=col(AgentSession.dropped) + dropped,
        )
    )
