"""The model door's side of envhub: agent runs on record as the door's port (gateway.modeldoor.Runs).

A run's first call reads it and its model preset (the preset's key opened) from the database; its ticket is then
kept in memory, so later calls are admitted without a read. An end through this process (its owner's, a limit, the
run's time, a harness job's: every end goes through the store's `end`) marks the ticket at once; an end by another
envhub process is seen at the next call after `recheck_s`, when the run's row is read again. Calls are written by
one task, in the order they were given, after their answers have gone."""

import asyncio
import hmac
import logging
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from app.agent_run_ends import RunEnds
from core.clock import as_utc, utcnow
from core.errors import UnauthorizedError
from evals.agent_runs import AgentRuns, credential_hash, run_of_credential
from evals.models import AgentRun, AgentRunStatus, ModelCall
from evals.presets import ModelPresets
from gateway.modeldoor import Call, Ticket

__all__ = ["DoorRuns"]

log = logging.getLogger("envhub.modeldoor")

KEPT_RUNS = 4096  # tickets kept; past that the oldest is read again from the database at its next call


@dataclass
class _Kept:
    ticket: Ticket
    credential_hash: str
    expires_at: datetime
    checked: float  # time.monotonic() of the last read of the run's row


class DoorRuns:
    def __init__(self, runs: AgentRuns, presets: ModelPresets, ends: RunEnds, recheck_s: float) -> None:
        self.runs, self.presets, self.ends, self.recheck_s = runs, presets, ends, recheck_s
        self._kept: dict[str, _Kept] = {}  # by run id (a run has one credential)
        self._calls: asyncio.Queue[Call] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        runs.on_end(self._ended)

    def _ended(self, run_id: str) -> None:
        """Called by the store as a run ends, from whichever thread ended it."""
        kept = self._kept.get(run_id)
        if kept is not None:
            kept.ticket.ended = True

    async def admit(self, credential: str) -> Ticket:
        kept = self._kept.get(run_of_credential(credential) or "")
        if kept is None or not hmac.compare_digest(kept.credential_hash, credential_hash(credential)):
            return await self._admit_anew(credential)
        ticket = kept.ticket
        if not ticket.ended and utcnow() >= kept.expires_at:
            await self.end(ticket.run, AgentRunStatus.STOPPED, "run_expired", "the run's time ran out")
        elif not ticket.ended and time.monotonic() - kept.checked >= self.recheck_s:
            kept.checked = time.monotonic()
            run = await asyncio.to_thread(self.runs.get, ticket.run)
            ticket.ended = ticket.ended or run.status != AgentRunStatus.RUNNING
            # Calls another process passed on count here too; this process's own are counted before they are written.
            ticket.calls = max(ticket.calls, run.calls)
            ticket.output_tokens = max(ticket.output_tokens, run.output_tokens)
        if ticket.ended:
            raise UnauthorizedError(f"agent run {ticket.run} has ended: start a new run", code="run_ended")
        return ticket

    async def _admit_anew(self, credential: str) -> Ticket:
        run, ticket = await asyncio.to_thread(self._ticket, credential)
        # Two first calls at once read the run twice: the first ticket kept is the one both count on.
        kept = self._kept.setdefault(
            run.id, _Kept(ticket, run.credential_hash, as_utc(run.expires_at), time.monotonic())
        )
        if len(self._kept) > KEPT_RUNS:
            del self._kept[next(iter(self._kept))]
        return kept.ticket

    def _ticket(self, credential: str) -> tuple[AgentRun, Ticket]:
        run = self.runs.admit(credential)
        assert run.owner is not None, "a run is made with its owner's preset"
        config = self.presets.config_of(self.presets.get(run.owner, run.preset))
        key = config.api_key.get_secret_value() if config.api_key is not None else None
        limits = run.limits
        return run, Ticket(
            run=run.id,
            base_url=config.base_url,
            headers={"authorization": f"Bearer {key}", "x-api-key": key} if key else {},
            model=config.model,
            token_ids=config.token_ids,
            timeout_s=config.timeout_s,
            max_calls=int(limits["max_calls"]),
            max_output_tokens=int(limits["max_output_tokens"]),
            deadline=as_utc(run.created_at) + timedelta(seconds=float(limits["wall_s"])),
            calls=run.calls,
            output_tokens=run.output_tokens,
        )

    def record(self, call: Call) -> None:
        self._calls.put_nowait(call)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write())

    async def _write(self) -> None:
        while True:
            call = await self._calls.get()
            try:
                await asyncio.to_thread(self._write_one, call)
            except Exception:  # a call that could not be kept must not keep the ones after it from being kept
                log.exception("could not record a model call of agent run %s", call.run)
            finally:
                self._calls.task_done()

    def _write_one(self, call: Call) -> None:
        """In a worker thread: the row is built there too (a request's messages are copied into it)."""
        self.runs.record(ModelCall(id="", index=0, **asdict(call)))

    async def end(self, run: str, status: str, code: str, message: str) -> None:
        self._ended(run)
        await self.ends.end(run, status, code, message)  # a whole run's end: its door sessions too

    async def aclose(self) -> None:
        await self._calls.join()
        if self._writer is not None:
            self._writer.cancel()
