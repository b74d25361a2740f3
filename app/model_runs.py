"""The model door's side of envhub: agent runs on record as the door's port (gateway.modeldoor.Runs), each run's
model preset opened into where its model is served and the key that reaches it. The database is read and written off
the event loop."""

import asyncio
from dataclasses import asdict
from datetime import timedelta

from core.clock import as_utc
from evals.agent_runs import AgentRuns
from evals.models import AgentRun, ModelCall
from evals.presets import ModelPresets
from gateway.modeldoor import Call, Ticket

__all__ = ["DoorRuns"]


class DoorRuns:
    def __init__(self, runs: AgentRuns, presets: ModelPresets) -> None:
        self.runs, self.presets = runs, presets

    async def admit(self, credential: str) -> Ticket:
        return await asyncio.to_thread(self._ticket, credential)

    def _ticket(self, credential: str) -> Ticket:
        run = self.runs.admit(credential)
        config = self.presets.config_of(self.presets.get(_owner(run), run.preset))
        key = config.api_key.get_secret_value() if config.api_key is not None else None
        limits = run.limits
        return Ticket(
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

    async def record(self, call: Call) -> None:
        await asyncio.to_thread(self.runs.record, ModelCall(id="", index=0, **asdict(call)))

    async def end(self, run: str, status: str, code: str, message: str) -> None:
        await asyncio.to_thread(self.runs.end, run, status, code, message)


def _owner(run: AgentRun) -> str:
    assert run.owner is not None, "a run is made with its owner's preset"
    return run.owner
