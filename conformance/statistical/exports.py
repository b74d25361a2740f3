"""What leaves envhub of the lane, in the keys OpenEnv's draft RFC 013 names: a task split with each task's
`difficulty`, an evaluation's result (`success_rate` ± SE, `mean_reward`, `pass@k`, `error_rate`, `by_difficulty`,
`per_task`, `reproducible`), and "the tasks that teach": the split filtered to 0 < p < 1, by P(signal)."""

import math
from collections.abc import Sequence
from typing import Any

from conformance.statistical.figures import mean_se
from conformance.statistical.lane import Played, per_task
from conformance.statistical.models import TaskDifficulty

__all__ = ["BANDS", "band", "evaluation_result", "task_split", "teaching"]

BANDS = ("easy", "medium", "hard")  # by the share of samples that failed: below 1/3, below 2/3, the rest


def band(row: TaskDifficulty) -> str:
    failed = 1 - row.passes / row.samples if row.samples else 1.0
    return BANDS[min(int(failed * 3), 2)]


def _spec(row: TaskDifficulty) -> dict[str, Any]:
    spec: dict[str, Any] = {"id": row.task}
    spec.update({key: row.reset[key] for key in ("split", "index", "seed", "group") if key in row.reset})
    return spec | {"difficulty": round(1 - row.passes / row.samples, 4) if row.samples else None}


def task_split(rows: Sequence[TaskDifficulty]) -> list[dict[str, Any]]:
    """Each task as an RFC 013 task spec: `difficulty` is the share of the player's samples that failed."""
    return [_spec(row) | {"band": band(row), "p_signal": row.p_signal, "pass_at_k": row.pass_at_k} for row in rows]


def teaching(rows: Sequence[TaskDifficulty]) -> list[TaskDifficulty]:
    """The tasks whose groups differ for this player (0 < p < 1), the most signal first."""
    return sorted((r for r in rows if 0 < r.passes < r.samples), key=lambda r: (-r.p_signal, r.task))


def evaluation_result(
    played: Played, k: int, difficulty: dict[str, TaskDifficulty], reproducible: bool | None
) -> dict[str, Any]:
    """An evaluation's figures in RFC 013's fields; `difficulty` (by task key) groups them by band where known."""
    tasks = per_task(played, k, 2)
    n = len(played.episodes)
    rate = played.passes / n if n else None
    mean, se = mean_se(played.rewards)
    by_band: dict[str, list[float]] = {}
    for t in tasks:
        known = difficulty.get(t.task)
        if known is not None:
            by_band.setdefault(band(known), []).extend(e.reward for e in played.episodes if e.id in t.episodes)
    return {
        "evaluation": played.evaluation,
        "success_rate": rate,
        "success_rate_se": math.sqrt(rate * (1 - rate) / n) if rate is not None and n else None,
        "mean_reward": mean,
        "mean_reward_se": se,
        "pass@k": {"k": k, "value": mean_se([t.pass_at_k for t in tasks if t.pass_at_k is not None])[0]},
        "error_rate": sum(e.status == "failed" for e in played.episodes) / n if n else None,
        "by_difficulty": {name: mean_se(rewards)[0] for name, rewards in by_band.items()},
        "per_task": [
            {
                "id": t.task,
                "samples": t.n,
                "success_rate": t.pass_rate,
                "mean_reward": t.mean_reward,
                "pass@k": t.pass_at_k,
            }
            for t in tasks
        ],
        "reproducible": reproducible,
    }
