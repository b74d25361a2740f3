"""An agent session's episodes as the door keeps them: each tool call with what came back, its reward and done.

An episode begins at a reset (the generated `reset` tool, or the reset the door sends when a session of an MCP
environment opens) and ends when the environment says done, or is cut when the session resets or ends first.
What is kept is bounded: observations, and what the client sent (arguments, actions, reset options, and the
refusals that may quote them), past a size are cut to their start and digest, and an episode keeps its first
records only (so many, and so many bytes of them), so a long session costs the door a bounded amount of memory.
"""

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gateway.mcp.recorder import EpisodeRecord
from protocol.observations import kept, reward_number, success

__all__ = ["MAX_EPISODE_BYTES", "MAX_KEPT", "MAX_RECORDS", "EpisodeLog"]

MAX_KEPT = 64 * 1024  # characters of JSON of one value (an observation, the arguments, ...) kept whole in a record
MAX_RECORDS = 512  # records one episode keeps; its figures count every step
MAX_EPISODE_BYTES = 8 * 1024 * 1024  # bytes of JSON of the records one episode keeps in memory


@dataclass
class EpisodeLog:
    """One episode under way: its records and running figures."""

    session: str
    index: int
    seed: int | None = None
    task: dict[str, Any] | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    reward: float = 0.0
    final_reward: float | None = None
    success: bool | None = None
    done: bool = False
    steps: int = 0
    invalid: int = 0
    dropped: int = 0  # records past MAX_RECORDS or MAX_EPISODE_BYTES, counted but not kept
    size: int = 0  # bytes of JSON of the records kept
    started: float = field(default_factory=time.monotonic)
    error: str | None = None

    def add(
        self,
        kind: str,
        observation: Any,
        reward: Any,
        done: bool,
        env_ms: float,
        refused: str | None = None,
        **fields: Any,
    ) -> None:
        """A reset or a step (a tool call) and what the environment answered; a refused step counts as invalid."""
        value = reward_number(reward)
        if kind == "step":
            if refused is not None:
                self.invalid += 1
            else:
                self.steps += 1
                self.reward += value or 0.0
                self.final_reward = value
        self.done = done
        self.success = success(observation) if isinstance(observation, dict) else self.success
        if len(self.records) >= MAX_RECORDS or self.size >= MAX_EPISODE_BYTES:
            self.dropped += 1
            return
        record = {
            "kind": kind,
            "index": len(self.records),
            **{name: kept(value, MAX_KEPT) for name, value in fields.items()},
            "observation": kept(observation, MAX_KEPT),
            "reward": reward,
            "done": done,
            "env_ms": round(env_ms, 3),
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            **({"refused": kept(refused, MAX_KEPT)} if refused is not None else {}),
        }
        self.size += len(json.dumps(record, ensure_ascii=False, default=str))
        self.records.append(record)

    def record(self, *, ended: str | None = None, code: str = "") -> EpisodeRecord:
        """The episode as the store keeps it; `ended` says why it stopped before done, when it did, and `code` so."""
        status = "done" if self.done else ("cut" if ended is not None else "running")
        error, cut = self.error, ended is not None and not self.done
        if cut:
            error = error or ended
        if self.dropped:
            note = f"{self.dropped} records past the first {len(self.records)} were not kept"
            error = f"{error}; {note}" if error else note
        return EpisodeRecord(
            session=self.session,
            index=self.index,
            seed=self.seed,
            task=kept(self.task, MAX_KEPT),  # a split's name is the client's
            status=status,
            error=error,
            code=code if cut else "",
            reward=self.reward,
            final_reward=self.final_reward,
            success=self.success,
            steps=self.steps,
            invalid=self.invalid,
            wall_s=round(time.monotonic() - self.started, 3),
            records=list(self.records),
        )
