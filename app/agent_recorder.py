"""The MCP door's recorder: what the door asks of the control plane (the catalog's card of an endpoint's
environment, a linked dataset's row, the agent sessions' rows), each read or written off the event loop."""

import asyncio
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from catalog.store import get_environment
from catalog.tasksets import Tasksets, dataset_resets
from core.errors import EnvhubError
from evals.agent_sessions import AgentSessions, agent_episode_id
from evals.models import AgentSession, Episode
from gateway.mcp import Card, EpisodeRecord, SessionRecord
from hosting.endpoints import EndpointManager

__all__ = ["AgentRecorder"]


class AgentRecorder:
    """What the door asks of the control plane: the catalog's card, a dataset's row, and the agent sessions'
    rows, each read or written off the event loop."""

    def __init__(self, engine: Engine, endpoints: EndpointManager, tasksets: Tasksets, store: AgentSessions) -> None:
        self.engine, self.endpoints, self.tasksets, self.store = engine, endpoints, tasksets, store

    async def card(self, endpoint_id: str) -> Card:
        def read() -> Card:
            endpoint = self.endpoints.get(endpoint_id)
            try:
                with Session(self.engine) as session:
                    environment = get_environment(session, endpoint.environment)
            except EnvhubError:
                return Card(endpoint.environment, endpoint.revision)
            return Card(
                environment.id,
                endpoint.revision,
                environment.title,
                environment.readme,
                tuple(environment.datasets),
            )

        return await asyncio.to_thread(read)

    async def dataset_task(self, endpoint_id: str, dataset: str, split: str, index: int) -> dict[str, Any]:
        def read() -> dict[str, Any]:
            endpoint = self.endpoints.get(endpoint_id)
            try:
                with Session(self.engine) as session:
                    environment = get_environment(session, endpoint.environment)
                    # The door's session names no client here: its rows count against the dataset and the hour.
                    resets, _ = dataset_resets(session, self.tasksets, environment, dataset, split, [index], None)
            except EnvhubError as exc:
                raise ValueError(exc.message) from exc
            return resets[0]

        return await asyncio.to_thread(read)

    async def opened(self, session: SessionRecord) -> None:
        row = AgentSession(
            id=session.id,
            endpoint=session.endpoint,
            environment=session.environment,
            revision=session.revision,
            client=session.client,
            protocol_version=session.protocol_version,
            owner=session.user,
            run=session.run,
            client_session=session.client_session,
            tools=list(session.tools),
            holder=session.holder,
        )
        await asyncio.to_thread(self.store.open, row)

    async def episode(self, episode: EpisodeRecord) -> None:
        row = Episode(
            id=agent_episode_id(episode.session, episode.index),
            evaluation=episode.session,
            index=episode.index,
            seed=episode.seed,
            task=episode.task,
            status=episode.status,
            error=episode.error,
            code=episode.code,
            reward=episode.reward,
            final_reward=episode.final_reward,
            success=episode.success,
            steps=episode.steps,
            invalid=episode.invalid,
            tokens=0,
            wall_s=episode.wall_s,
            records=episode.records,
        )
        await asyncio.to_thread(self.store.write_episode, row)

    async def closed(self, session_id: str, reason: str, code: str) -> None:
        await asyncio.to_thread(self.store.end, session_id, reason, code)
