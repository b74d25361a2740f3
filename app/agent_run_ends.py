"""Ending an agent run, however it ends (its owner, a limit of the model door, envhub's harness job): the run is
ended on record, its MCP door sessions end (their slots back at once, their episodes kept), and its reward is
settled from the episodes they played."""

import asyncio

from evals.agent_runs import AgentRuns, settle_reward
from evals.models import AgentRun
from gateway.mcp import Door

__all__ = ["RunEnds"]


class RunEnds:
    def __init__(self, runs: AgentRuns, door: Door) -> None:
        self.runs, self.door = runs, door

    async def end(self, run_id: str, status: str, code: str = "", message: str = "") -> AgentRun | None:
        """End the run if it is running (one already over stays as it ended); the run as it then is."""
        await asyncio.to_thread(self.runs.end, run_id, status, code, message)
        await self.door.end_run(run_id)  # its last episodes are written as its sessions close
        return await asyncio.to_thread(settle_reward, self.runs.engine, run_id)
