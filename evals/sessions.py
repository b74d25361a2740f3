"""Agent sessions on record: the MCP sessions agent harnesses play through endpoints' MCP doors, each with its
episodes, kept in the evaluations' episode table so that the episode viewer and the exports read them alike."""

from collections.abc import Sequence

from sqlalchemy import Engine, func, update
from sqlmodel import Session, col, select

from core.clock import utcnow
from core.errors import NotFoundError
from evals.models import AgentSession, AgentSessionBase, AgentSessionPublic, Episode, EpisodePublic

__all__ = ["AgentSessions", "agent_episode_id"]

ENDED = "ended"


def agent_episode_id(session_id: str, index: int) -> str:
    """An agent session's episodes are named as a run's are: <session>-<index>, the viewer's share link id."""
    return f"{session_id}-{index}"


class AgentSessions:
    """The agent sessions' rows, written as the door plays them (this envhub process is `instance`)."""

    def __init__(self, engine: Engine, instance: str = "") -> None:
        self.engine = engine
        self.instance = instance

    def open(self, row: AgentSession) -> None:
        row.instance = self.instance
        with Session(self.engine) as session:
            session.add(row)
            session.commit()

    def write_episode(self, episode: Episode) -> None:
        """Keep the episode as it stands now, and the session's figures over every episode kept so far."""
        with Session(self.engine) as session:
            session.merge(episode)
            session.flush()
            count, reward, steps = session.exec(
                select(
                    func.count(),
                    func.coalesce(func.sum(Episode.reward), 0.0),
                    func.coalesce(func.sum(Episode.steps), 0),
                ).where(Episode.evaluation == episode.evaluation)
            ).one()
            session.execute(
                update(AgentSession)
                .where(col(AgentSession.id) == episode.evaluation)
                .values(episode_count=int(count), reward=float(reward), steps=int(steps))
            )
            session.commit()

    def end(self, session_id: str, reason: str) -> None:
        with Session(self.engine) as session:
            session.execute(
                update(AgentSession)
                .where(col(AgentSession.id) == session_id, col(AgentSession.status) != ENDED)
                .values(status=ENDED, message=reason, ended_at=utcnow())
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
                    .values(status=ENDED, message="envhub stopped while it was open", ended_at=utcnow())
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

    def episodes(self, session_id: str) -> Sequence[Episode]:
        with Session(self.engine) as session:
            return session.exec(
                select(Episode).where(Episode.evaluation == session_id).order_by(col(Episode.index))
            ).all()

    def public(self, endpoint_id: str, session_id: str) -> AgentSessionPublic:
        """The session with every episode and its records."""
        row = self.get(endpoint_id, session_id)
        episodes = [EpisodePublic.model_validate(e.model_dump()) for e in self.episodes(session_id)]
        return AgentSessionPublic.model_validate({**row.model_dump(), "episodes": episodes})
