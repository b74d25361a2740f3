"""Agent runs on record: each run's credential (only its hash kept), its limits and figures, and the model calls its
harness sent through the model door, in order."""

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, update
from sqlmodel import Session, col, select

from core.clock import as_utc, utcnow
from core.errors import NotFoundError, UnauthorizedError
from evals.models import AgentRun, AgentRunStatus, AgentSession, Episode, ModelCall

__all__ = [
    "CREDENTIAL_PREFIX",
    "AgentRuns",
    "DoorSide",
    "credential_hash",
    "door_side",
    "mint_credential",
    "run_of_credential",
    "run_reward",
    "settle_reward",
]

CREDENTIAL_PREFIX = "envhub-run."
_RUN_ID_HEX = 12


def mint_credential(run_id: str) -> str:
    return f"{CREDENTIAL_PREFIX}{run_id}.{secrets.token_urlsafe(32)}"


def run_of_credential(credential: str) -> str | None:
    """The run a credential names, read from it alone (it says nothing of whether the credential is valid)."""
    if not credential.startswith(CREDENTIAL_PREFIX):
        return None
    run_id, dot, secret = credential.removeprefix(CREDENTIAL_PREFIX).partition(".")
    if not dot or not secret or not run_id.startswith("ar-") or len(run_id) != 3 + _RUN_ID_HEX:
        return None
    return run_id


def credential_hash(credential: str) -> str:
    return hashlib.sha256(credential.encode()).hexdigest()


def _unknown() -> UnauthorizedError:
    return UnauthorizedError(
        "this is not an agent run's credential: start a run (POST /api/agent-runs) and send the credential it gives "
        "as the model API key",
        code="run_unknown",
    )


class AgentRuns:
    """The agent runs' rows (this envhub process is `instance`) and their model calls."""

    def __init__(self, engine: Engine, instance: str = "") -> None:
        self.engine = engine
        self.instance = instance

    def create(
        self,
        owner: str | None,
        endpoint: str,
        environment: str,
        revision: str | None,
        harness: str,
        preset: str,
        model: str,
        task: dict[str, Any] | None,
        limits: dict[str, Any],
        ttl_s: float,
    ) -> tuple[AgentRun, str]:
        """A running run and its credential, which is given out this once: only its hash is kept."""
        run_id = f"ar-{secrets.token_hex(_RUN_ID_HEX // 2)}"
        credential = mint_credential(run_id)
        now = utcnow()
        run = AgentRun(
            id=run_id,
            owner=owner,
            endpoint=endpoint,
            environment=environment,
            revision=revision,
            harness=harness,
            preset=preset,
            model=model,
            task=task,
            limits=limits,
            expires_at=now + timedelta(seconds=ttl_s),
            created_at=now,
            credential_hash=credential_hash(credential),
            instance=self.instance,
        )
        with Session(self.engine) as session:
            session.add(run)
            session.commit()
            session.refresh(run)
        return run, credential

    def admit(self, credential: str) -> AgentRun:
        """The running run the credential is of; 401 run_unknown when it is of none, run_ended when its run is over
        (an expired one is ended here, stopped)."""
        run_id = run_of_credential(credential)
        if run_id is None:
            raise _unknown()
        with Session(self.engine) as session:
            run = session.get(AgentRun, run_id)
        if run is None or not hmac.compare_digest(run.credential_hash, credential_hash(credential)):
            raise _unknown()
        if run.status == AgentRunStatus.RUNNING and as_utc(run.expires_at) <= utcnow():
            run = self.end(run_id, AgentRunStatus.STOPPED, "run_expired", "the run's time ran out") or run
        if run.status != AgentRunStatus.RUNNING:
            raise UnauthorizedError(
                f"agent run {run_id} has ended ({run.status}{': ' + run.code if run.code else ''}): start a new run",
                code="run_ended",
            )
        return run

    def record(self, call: ModelCall) -> ModelCall:
        """Keep the call as its run's next one (its index and id are given here) and add it to the run's figures."""
        usage = call.usage or {}
        with Session(self.engine) as session:
            # The figure's update comes first: it takes the write lock, so two calls recorded at once get two indices.
            session.execute(
                update(AgentRun)
                .where(col(AgentRun.id) == call.run)
                .values(
                    calls=col(AgentRun.calls) + 1,
                    input_tokens=col(AgentRun.input_tokens) + int(usage.get("input_tokens") or 0),
                    output_tokens=col(AgentRun.output_tokens) + int(usage.get("output_tokens") or 0),
                )
            )
            run = session.get(AgentRun, call.run)
            if run is None:
                raise NotFoundError(f"no agent run {call.run!r}")
            call.index = run.calls - 1
            call.id = f"{call.run}-{call.index}"
            if call.client_session and call.client_session not in run.client_sessions:
                run.client_sessions = [*run.client_sessions, call.client_session]
                session.add(run)
            session.add(call)
            session.commit()
            session.refresh(call)
        return call

    def end(self, run_id: str, status: str, code: str = "", message: str = "") -> AgentRun | None:
        """End the run if it is running; the run as it then is (None when there is no such run)."""
        with Session(self.engine) as session:
            session.execute(
                update(AgentRun)
                .where(col(AgentRun.id) == run_id, col(AgentRun.status) == AgentRunStatus.RUNNING)
                .values(status=status, code=code, message=message, ended_at=utcnow())
            )
            session.commit()
            return session.get(AgentRun, run_id)

    def get(self, run_id: str) -> AgentRun:
        with Session(self.engine) as session:
            run = session.get(AgentRun, run_id)
        if run is None:
            raise NotFoundError(f"no agent run {run_id!r}; GET /api/agent-runs lists yours")
        return run

    def list_for(self, owner: str | None = None, endpoint: str | None = None, limit: int = 100) -> list[AgentRun]:
        """The newest runs first, of an owner, of an endpoint, or of both."""
        query = select(AgentRun).order_by(col(AgentRun.created_at).desc()).limit(limit)
        if owner is not None:
            query = query.where(col(AgentRun.owner) == owner)
        if endpoint is not None:
            query = query.where(col(AgentRun.endpoint) == endpoint)
        with Session(self.engine) as session:
            return list(session.exec(query))

    def calls(self, run_id: str) -> list[ModelCall]:
        with Session(self.engine) as session:
            return list(
                session.exec(select(ModelCall).where(col(ModelCall.run) == run_id).order_by(col(ModelCall.index)))
            )


@dataclass(frozen=True)
class DoorSide:
    """What a run played through the MCP door: its agent sessions (those whose `run` is its id) and their episodes,
    in order."""

    sessions: list[AgentSession]
    episodes: list[Episode]

    @property
    def tools(self) -> set[str]:
        """The environment's tools its sessions offered."""
        return {tool for s in self.sessions for tool in s.tools}


def door_side(engine: Engine, run_id: str) -> DoorSide:
    with Session(engine) as session:
        sessions = list(
            session.exec(
                select(AgentSession).where(col(AgentSession.run) == run_id).order_by(col(AgentSession.created_at))
            )
        )
        order = {s.id: n for n, s in enumerate(sessions)}
        episodes = list(session.exec(select(Episode).where(col(Episode.evaluation).in_(list(order)))))
    episodes.sort(key=lambda e: (order[e.evaluation], e.index))
    return DoorSide(sessions, episodes)


def run_reward(episodes: list[Episode]) -> float | None:
    """A run's reward as an evaluation counts an episode's: the sum of its rewards, here over every door episode the
    run played; None when no step of any gave a reward (no reward is not 0)."""
    rewarded = [e.reward for e in episodes if e.final_reward is not None]
    return sum(rewarded) if rewarded else None


def settle_reward(engine: Engine, run_id: str) -> AgentRun | None:
    """Write the run's reward from its door episodes; the run as it then is (None when there is no such run)."""
    reward = run_reward(door_side(engine, run_id).episodes)
    with Session(engine) as session:
        session.execute(update(AgentRun).where(col(AgentRun.id) == run_id).values(reward=reward))
        session.commit()
        return session.get(AgentRun, run_id)
