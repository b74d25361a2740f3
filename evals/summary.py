"""An evaluation's figures, computed from its recorded episodes: mean reward with a 95 % confidence
interval, success rate, steps, invalid replies, tokens and wall time."""

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["EpisodeFigures", "Summary", "succeeded", "summarize", "t_975"]

# Student's t at 0.975 for small degrees of freedom; beyond the table it is read off 1/df.
_T = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
_T_TAIL = [(10, 2.228), (15, 2.131), (20, 2.086), (30, 2.042), (40, 2.021), (60, 2.000), (120, 1.980)]
_Z = 1.960


def t_975(df: int) -> float:
    """The two-sided 95 % critical value of Student's t with df degrees of freedom."""
    if df < 1:
        raise ValueError("df must be at least 1")
    if df in _T:
        return _T[df]
    for (low, t_low), (high, t_high) in itertools.pairwise(_T_TAIL):
        if low <= df <= high:  # linear in 1/df, as tables are interpolated
            share = (1 / low - 1 / df) / (1 / low - 1 / high)
            return t_low + (t_high - t_low) * share
    share = 120 / df  # from 120 to infinity, linear in 1/df again
    return _Z + (1.980 - _Z) * share


@dataclass(frozen=True)
class EpisodeFigures:
    """What the summary needs of one finished episode."""

    reward: float  # the sum of the episode's rewards
    final_reward: float | None  # the last step's reward
    success: bool | None  # the environment's own word, when it gives one
    steps: int
    invalid: int  # replies that gave no valid action, and actions the server refused
    tokens: int
    completed: bool  # False when it ended on an error, a limit or refused moves rather than on done


@dataclass(frozen=True)
class Summary:
    episodes: int
    completed: int
    mean_reward: float | None
    ci95: float | None  # half-width of the interval around mean_reward
    success_rate: float | None
    mean_steps: float | None
    invalid_rate: float | None  # invalid replies per action sent
    tokens: int
    wall_s: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def succeeded(episode: EpisodeFigures) -> bool:
    if episode.success is not None:
        return episode.success
    return episode.completed and episode.final_reward is not None and episode.final_reward > 0


def summarize(episodes: Sequence[EpisodeFigures], wall_s: float) -> Summary:
    """The figures over every episode recorded; an episode cut short counts with what it scored."""
    n = len(episodes)
    if n == 0:
        return Summary(0, 0, None, None, None, None, None, 0, round(wall_s, 3))
    rewards = [e.reward for e in episodes]
    mean = statistics.fmean(rewards)
    ci = t_975(n - 1) * statistics.stdev(rewards) / math.sqrt(n) if n > 1 else None
    steps = sum(e.steps for e in episodes)
    invalid = sum(e.invalid for e in episodes)
    attempts = steps + invalid
    return Summary(
        episodes=n,
        completed=sum(e.completed for e in episodes),
        mean_reward=mean,
        ci95=ci,
        success_rate=sum(succeeded(e) for e in episodes) / n,
        mean_steps=steps / n,
        invalid_rate=invalid / attempts if attempts else 0.0,
        tokens=sum(e.tokens for e in episodes),
        wall_s=round(wall_s, 3),
    )
