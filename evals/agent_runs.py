"""Agent runs on record: each run's credential (only its hash kept), its limits and figures, and the model calls its
harness sent through the model door, in order; and who may see a run (its owner and the admin: to anyone else it
does not exist)."""

import hashlib
import hmac
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, String, cast, or_, update
from sqlmodel import Session, col, select

from core.callers import Access, Caller
from core.clock import as_utc, utcnow
from core.errors import NotFoundError, UnauthorizedError
from evals.models import AgentRun, AgentRunStatus, AgentSession, Episode, ModelCall
from evals.presets import LOCAL_OWNER

__all__ = [
    "CREDENTIAL_PREFIX",
    "AgentRuns",
    "DoorSide",
    "credential_hash",
    "door_side",
    "may_see_run",
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


def may_see_run(access: Access, caller: Caller, owner: str | None) -> bool:
    """Whether the caller may see a run of `owner` (the owner of the presets it used): its owner and the admin may.
    The local owner's runs (the admin's; anyone's on a server without sign-in) are nobody in particular's."""
    return access.may_use(caller, None if owner == LOCAL_OWNER else owner, private=True)


def _not_found(run_id: str) -> NotFoundError:
    return NotFoundError(
        f"no agent run {run_id!r}: check the id (GET /api/agent-runs lists yours), or sign in as its owner",
        code="agent_run_not_found",
    )


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
        self._end_listeners: list[Callable[[str], None]] = []

    def on_end(self, listener: Callable[[str], None]) -> None:
        """Have `listener(run_id)` called as each run ends through this store, in the thread that ended it, before
        `end` returns."""
        self._end_listeners.append(listener)

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
            run = session.get(AgentRun, run_id)
        if run is not None and run.status != AgentRunStatus.RUNNING:
            for listener in self._end_listeners:
                listener(run_id)
        return run

    def get(self, run_id: str) -> AgentRun:
        with Session(self.engine) as session:
            run = session.get(AgentRun, run_id)
        if run is None:
            raise _not_found(run_id)
        return run

    def visible(self, access: Access, caller: Caller, run_id: str) -> AgentRun:
        """The run, if the caller may see it; to anyone else it does not exist (404 agent_run_not_found)."""
        with Session(self.engine) as session:
            run = session.get(AgentRun, run_id)
        if run is None or not may_see_run(access, caller, run.owner):
            raise _not_found(run_id)
        return run

    def list_visible(
        self,
        access: Access,
        caller: Caller,
        *,
        endpoint: str | None = None,
        harness: str | None = None,
        model: str | None = None,
        newest: int | None = None,
    ) -> list[AgentRun]:
        """The runs the caller may see, filtered as asked: oldest first, or the `newest` ones, newest first."""
        query = select(AgentRun)
        for column, value in ((AgentRun.endpoint, endpoint), (AgentRun.harness, harness), (AgentRun.model, model)):
            if value:
                query = query.where(col(column) == value)
        if not caller.admin:  # only the rows may_see_run could let through are read: it decides
            owners = [owner for owner in (caller.name, None if access.sign_in else LOCAL_OWNER) if owner]
            nobody = [] if access.sign_in else [col(AgentRun.owner).is_(None)]
            query = query.where(or_(col(AgentRun.owner).in_(owners), *nobody))
        if newest is None:
            query = query.order_by(col(AgentRun.created_at), col(AgentRun.id))
        else:
            query = query.order_by(col(AgentRun.created_at).desc(), col(AgentRun.id).desc()).limit(newest)
        with Session(self.engine) as session:
            return [run for run in session.exec(query) if may_see_run(access, caller, run.owner)]

    def calls(self, run_id: str) -> list[ModelCall]:
        with Session(self.engine) as session:
            return list(
                session.exec(select(ModelCall).where(col(ModelCall.run) == run_id).order_by(col(ModelCall.index)))
            )

    def with_token_ids(self, run_ids: Iterable[str]) -> set[str]:
        """Those of the runs one of whose calls has its token ids recorded (a JSON null is no ids)."""
        ids = col(ModelCall.prompt_token_ids)
        query = select(ModelCall.run).where(col(ModelCall.run).in_(list(run_ids)), ids.is_not(None))
        with Session(self.engine) as session:
            return set(session.exec(query.where(cast(ids, String) != "null").distinct()))


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
