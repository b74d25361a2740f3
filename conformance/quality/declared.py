"""What an environment declares about its episodes, for the quality checks to hold it to: the reward range and
the episode budget.

The range comes from `openenv.yaml`'s `validation.reward.range` (RFC 008), else from a README line that states
it plainly ("Rewards lie in [0, 1]"); nothing else in a README is guessed at. The time budget is the
manifest's `validation.resources.episode_timeout_s`. RFC 008 declares no step budget: the checks take the
`max_steps` an environment's state reports, else `DEFAULT_MAX_STEPS`.
"""

import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_MAX_STEPS", "RANGE_FIX", "Declared", "declared"]

DEFAULT_MAX_STEPS = 500
MANIFEST_RANGE = "openenv.yaml validation.reward.range"
RANGE_FIX = (
    f"declare the reward range in {MANIFEST_RANGE} (RFC 008), or in a README line such as 'Rewards lie in [0, 1]'"
)
# "reward" or "rewards", a few words on the same line, then [low, high]
_README_RANGE = re.compile(r"\brewards?\b[^\n\[\]]{0,60}?\[\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\]", re.I)


@dataclass(frozen=True)
class Declared:
    reward_range: tuple[float, float] | None = None
    range_source: str = ""  # where the range was read
    range_problem: str = ""  # why there is none
    episode_timeout_s: float | None = None


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _range(value: Any) -> tuple[float, float] | None:
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    low, high = _number(value[0]), _number(value[1])
    return (low, high) if low is not None and high is not None and low < high else None


def _section(parent: dict[str, Any] | None, key: str) -> dict[str, Any]:
    value = (parent or {}).get(key)
    return value if isinstance(value, dict) else {}


def declared(manifest: dict[str, Any] | None, readme: str | None) -> Declared:
    """The declarations of a manifest (as the catalog parsed it) and a README."""
    validation = _section(manifest, "validation")
    reward, resources = _section(validation, "reward"), _section(validation, "resources")
    timeout = _number(resources.get("episode_timeout_s"))
    timeout = timeout if timeout is not None and timeout > 0 else None
    if "range" in reward:
        found = _range(reward["range"])
        if found is not None:
            return Declared(found, MANIFEST_RANGE, episode_timeout_s=timeout)
        problem = f"{MANIFEST_RANGE} is {reward['range']!r}, not [low, high] with low < high"
        return Declared(range_problem=problem, episode_timeout_s=timeout)
    match = _README_RANGE.search(readme or "")
    if match is not None:
        found = _range([float(match.group(1)), float(match.group(2))])
        if found is not None:
            return Declared(found, f"the README ({match.group(0).strip()!r})", episode_timeout_s=timeout)
    return Declared(range_problem="no reward range is declared", episode_timeout_s=timeout)
