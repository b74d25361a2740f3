"""What the lane's checks read: what the environment declares in its openenv.yaml's `validation:` block, and what
each reference player played (episodes on record, so that every figure points at episodes that replay)."""

import json
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from conformance import engine
from conformance.statistical.figures import mean_se, pass_at_k, signal, signal_interval, wilson
from conformance.statistical.gate import GatePolicy
from conformance.statistical.oracle import OracleRun
from evals.models import EpisodeBase
from evals.store import episode_figures
from evals.summary import succeeded

__all__ = [
    "RANGE_FIX",
    "Declared",
    "Lane",
    "LaneError",
    "Played",
    "Replayed",
    "TaskFigures",
    "declared_of",
    "per_task",
    "task_key",
]

HONEST = ("baseline", "model")  # the oracle is judged by reachability alone: it plays in the image, not here
MANIFEST_RANGE = "openenv.yaml validation.reward.range"
RANGE_FIX = f"declare the reward range in {MANIFEST_RANGE} (RFC 008): [low, high]"


class LaneError(Exception):
    """A reference player's evaluation could not run: the report fails rather than judge what it could not see."""


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


@dataclass(frozen=True)
class Declared:
    """The manifest's `validation:` block, as far as the lane reads it."""

    reward_range: tuple[float, float] | None
    range_problem: str
    oracle: dict[str, Any] | None  # capabilities.oracle: form and location
    judged: bool  # capabilities.llm_judged: a replay may differ within a tolerance
    floor_margin: float | None
    oracle_tolerance: float | None

    @property
    def span(self) -> float:
        return self.reward_range[1] - self.reward_range[0] if self.reward_range else 1.0


def _section(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def _range(reward: dict[str, Any]) -> tuple[tuple[float, float] | None, str]:
    """The declared range, or why there is none."""
    if "range" not in reward:
        return None, f"no reward range is declared ({MANIFEST_RANGE})"
    value = reward["range"]
    if isinstance(value, list) and len(value) == 2:
        low, high = _number(value[0]), _number(value[1])
        if low is not None and high is not None and low < high:
            return (low, high), ""
    return None, f"{MANIFEST_RANGE} is {value!r}, not [low, high] with low < high"


def declared_of(manifest: dict[str, Any] | None) -> Declared:
    """What the manifest (as the catalog parsed it) declares in its `validation:` block."""
    validation = _section(manifest or {}, "validation")
    reward, capabilities = _section(validation, "reward"), _section(validation, "capabilities")
    oracle = capabilities.get("oracle")
    reward_range, problem = _range(reward)
    return Declared(
        reward_range,
        problem,
        oracle if isinstance(oracle, dict) else None,
        capabilities.get("llm_judged") is True,
        _number(reward.get("floor_margin")),
        _number(reward.get("oracle_tolerance")),
    )


def task_key(episode: EpisodeBase) -> str:
    """What an episode played: its task's reset options, else its seed."""
    if episode.task:
        return json.dumps(episode.task, sort_keys=True, separators=(",", ":"))
    return f"seed:{episode.seed}"


@dataclass(frozen=True)
class Played:
    """One reference player's evaluation, with its episodes."""

    label: str
    kind: str  # baseline, adversarial, model or replay
    evaluation: str
    episodes: tuple[EpisodeBase, ...]

    @property
    def rewards(self) -> list[float]:
        return [e.reward for e in self.episodes]

    @property
    def passes(self) -> int:
        return sum(succeeded(episode_figures(e)) for e in self.episodes)

    def mean_se(self) -> tuple[float | None, float | None]:
        return mean_se(self.rewards)

    def best(self) -> EpisodeBase | None:
        return max(self.episodes, key=lambda e: e.reward, default=None)


@dataclass(frozen=True)
class Replayed:
    """An episode played again with its reset and actions: the step rewards of both."""

    original: EpisodeBase
    again: Played
    rewards: list[float | None]
    rewards_again: list[float | None]


@dataclass(frozen=True)
class TaskFigures:
    """One task's difficulty for one player: sampled `n` times."""

    task: str
    reset: dict[str, Any]
    n: int
    passes: int
    pass_at_k: float | None
    mean_reward: float | None
    se: float | None
    p_signal: float
    p_signal_interval: tuple[float, float]
    episodes: list[str] = field(default_factory=list)

    @property
    def pass_rate(self) -> float:
        return self.passes / self.n if self.n else 0.0


def per_task(played: Played, k: int, group: int) -> list[TaskFigures]:
    """Each task's pass@k, mean reward and P(signal) with its interval, in the order first played."""
    tasks: dict[str, list[EpisodeBase]] = {}
    for episode in sorted(played.episodes, key=lambda e: e.index):
        tasks.setdefault(task_key(episode), []).append(episode)
    figures = []
    for key, episodes in tasks.items():
        n, passes = len(episodes), sum(succeeded(episode_figures(e)) for e in episodes)
        low, high = wilson(passes, n)
        mean, se = mean_se([e.reward for e in episodes])
        first = episodes[0]
        reset = {**(first.task or {}), **({"seed": first.seed} if first.seed is not None else {})}
        figures.append(
            TaskFigures(
                key,
                reset,
                n,
                passes,
                pass_at_k(passes, n, k),
                mean,
                se,
                signal(passes / n, group),
                signal_interval(low, high, group),
                [e.id for e in episodes],
            )
        )
    return figures


@dataclass(frozen=True)
class Lane(engine.Lane):
    """The context every statistical check is a function of: run by the engine with no deadline of its own (each
    player's evaluation is bounded by the evaluation's limits)."""

    declared: Declared
    played: tuple[Played, ...]
    gate: GatePolicy
    k: int
    group: int
    replays: int  # episodes the variance check plays again
    replay: Callable[[EpisodeBase], Awaitable[Replayed]]
    oracle: OracleRun | None = None  # the declared oracle's run, or why it did not run; None when none is declared

    def of_kind(self, *kinds: str) -> list[Played]:
        return [p for p in self.played if p.kind in kinds]

    @property
    def honest(self) -> list[Played]:
        return self.of_kind(*HONEST)

    async def caught(self, check: engine.Check[Any], exc: Exception) -> engine.Finding | None:
        if isinstance(exc, LaneError):  # a replay did not play: the report fails, as when a player does not
            raise exc
        return None
