"""One played episode of the Play tab: its reset and steps, the running totals, and its JSONL export."""

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class Outcome:
    """What a reset or a step returned (openenv's StepResult, as plain data)."""

    observation: dict[str, Any]
    reward: float | None
    done: bool
    metadata: dict[str, Any] | None = None


def episode_filename(environment: str) -> str:
    """owner/name or template:name -> name-episode.jsonl"""
    return f"{environment.split('/')[-1].split(':')[-1]}-episode.jsonl"


@dataclass
class Episode:
    environment: str
    url: str
    records: list[dict[str, Any]] = field(default_factory=list)
    cumulative_reward: float = 0.0
    steps: int = 0
    done: bool = False
    resets: int = 0  # episodes begun in this session

    def reset(self, options: dict[str, Any], outcome: Outcome, latency_ms: float) -> dict[str, Any]:
        """Start over from a reset: the history so far is replaced."""
        self.records.clear()
        self.cumulative_reward, self.steps = 0.0, 0
        self.resets += 1
        return self._record({"kind": "reset", "options": options}, outcome, latency_ms)

    def step(self, action: dict[str, Any], outcome: Outcome, latency_ms: float) -> dict[str, Any]:
        self.steps += 1
        return self._record({"kind": "step", "action": action}, outcome, latency_ms)

    def _record(self, what: dict[str, Any], outcome: Outcome, latency_ms: float) -> dict[str, Any]:
        if isinstance(outcome.reward, int | float) and not isinstance(outcome.reward, bool):
            self.cumulative_reward += outcome.reward
        elif isinstance(outcome.reward, bool):
            self.cumulative_reward += float(outcome.reward)
        self.done = outcome.done
        record = {
            "index": len(self.records),
            **what,
            "observation": outcome.observation,
            "reward": outcome.reward,
            "done": outcome.done,
            "cumulative_reward": self.cumulative_reward,
            "step": self.steps,
            "latency_ms": round(latency_ms, 3),
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        }
        if outcome.metadata:
            record["metadata"] = outcome.metadata
        self.records.append(record)
        return record

    @property
    def started(self) -> bool:
        return bool(self.records)

    def to_jsonl(self) -> str:
        """One JSON object per line: the header, then the reset, then each step."""
        header = {"environment": self.environment, "url": self.url, "records": len(self.records)}
        lines = [json.dumps({"kind": "episode", **header}, ensure_ascii=False)]
        lines += [json.dumps(r, ensure_ascii=False, default=str) for r in self.records]
        return "\n".join(lines) + "\n"

    def history_rows(self) -> list[list[Any]]:
        """Newest first: step, what was sent, reward, done, cumulative reward."""
        rows = []
        for record in reversed(self.records):
            sent = record.get("action") if record["kind"] == "step" else record.get("options")
            rows.append(
                [
                    record["step"] if record["kind"] == "step" else "reset",
                    json.dumps(sent, ensure_ascii=False)[:200],
                    record["reward"],
                    record["done"],
                    round(record["cumulative_reward"], 6),
                ]
            )
        return rows
