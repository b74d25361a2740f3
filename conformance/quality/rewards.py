"""The checks of what rewards say: every reward well formed and within the declared range, and the floor that
trivial policies (the empty or default action, a constant action, the random baseline) must stay under."""

import math
from collections.abc import Callable
from typing import Any

from conformance.context import excerpt
from conformance.quality.declared import RANGE_FIX
from conformance.quality.episodes import Constant, Episode, play
from conformance.quality.report import Severity
from conformance.quality.run import NO_ACTION_FIX, Finding, Run
from conformance.report import Outcome
from protocol.schemas import resolve
from protocol.tools import example_action
from rollout.players import Player

__all__ = ["reward_well_formed", "trivial_policy_floor"]

FLOOR_SEEDS = (200, 201)


def _reward_problem(reward: Any, low_high: tuple[float, float] | None) -> str | None:
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        return f"{excerpt(reward, 40)} is not a number"
    if not math.isfinite(reward):
        return f"{reward!r} is not finite"
    if low_high is not None and not low_high[0] <= reward <= low_high[1]:
        return f"{reward!r} is outside the declared range [{low_high[0]:g}, {low_high[1]:g}]"
    return None


async def reward_well_formed(run: Run) -> Finding:
    """Every reward seen in the report is a finite number (a reset's may be null), within the declared range."""
    declared = run.declared
    seen: list[float] = []
    problems: list[str] = []
    for episode in run.episodes:
        rewards = [("the reset", episode.turns[0].reward)] if episode.turns[0].reward is not None else []
        rewards += [(f"step {n}", reward) for n, reward in enumerate(episode.step_rewards, start=1)]
        for where, reward in rewards:
            problem = _reward_problem(reward, declared.reward_range)
            if problem is None:
                seen.append(float(reward))
            elif len(problems) < 5:
                problems.append(f"{where} of the episode with seed {episode.seed}: the reward {problem}")
    measured = {
        "rewards": len(seen) + len(problems),
        "observed_min": min(seen, default=None),
        "observed_max": max(seen, default=None),
        "declared_range": list(declared.reward_range) if declared.reward_range else None,
        "range_source": declared.range_source or None,
    }
    if problems:
        fix = (
            "return a finite float reward on every step, within the range openenv.yaml validation.reward.range declares"
        )
        return Finding.failed(problems, fix, **measured)
    if not seen:
        return Finding.skipped("no reward was seen: no episode could be played", NO_ACTION_FIX, **measured)
    observed = f"observed [{measured['observed_min']:g}, {measured['observed_max']:g}] over {len(seen)} rewards"
    if declared.reward_range is None:
        return Finding.passed(
            f"every reward is a finite number; {observed}", f"range not checked: {declared.range_problem}", **measured
        )
    return Finding.passed(f"every reward is a finite number within {declared.range_source}; {observed}", **measured)


def _empty_action(run: Run) -> tuple[str, dict[str, Any] | None]:
    """The empty action when the schema requires nothing, else the schema's default (smallest) action."""
    schema = run.brief.action_schema
    if isinstance(schema, dict) and not run.brief.uses_tools:
        required = resolve(schema, schema).get("required") or []
        if not [name for name in required if name != "metadata"]:
            return "the empty action {}", {}
    action = example_action(schema, list(run.brief.tools))
    return f"the default action {excerpt(action, 80)}", action


async def _trivial_episodes(run: Run, label: str, player_of: Callable[[int], Player]) -> list[Episode]:
    episodes = []
    async with run.session(label) as session:
        for seed in FLOOR_SEEDS:
            episodes.append(
                await play(
                    session,
                    player_of(seed),
                    seed=seed,
                    episode_id=run.episode_id(f"floor{seed}"),
                    max_steps=run.max_steps,
                )
            )
    run.keep(*episodes)
    return episodes


async def trivial_policy_floor(run: Run) -> Finding:
    """What trivial policies earn per episode against the declared range: half way up warns, the top fails."""
    declared = run.declared.reward_range
    if declared is None:
        why = "the observed range cannot stand in: it comes from these same trivial policies"
        return Finding.skipped(f"{run.declared.range_problem}, so the floor cannot be judged ({why})", RANGE_FIX)
    if run.no_action:
        return Finding.skipped(run.no_action, NO_ACTION_FIX)
    empty_label, empty = _empty_action(run)
    async with run.session("floor, first move") as session:
        reset = await session.reset(seed=FLOOR_SEEDS[0], episode_id=run.episode_id("floor"))
        constant = (await run.random(0).act(reset.observation, None)).action
    policies: list[tuple[str, list[Episode]]] = []
    if empty is not None:
        policies.append((empty_label, await _trivial_episodes(run, "floor, empty", lambda _: Constant(empty))))
    if constant is not None and constant != empty:
        label = f"the constant action {excerpt(constant, 80)}"
        policies.append((label, await _trivial_episodes(run, "floor, constant", lambda _: Constant(constant))))
    randoms = run.random_episodes or await _trivial_episodes(run, "floor, random", run.random)
    policies.append(("the random baseline", randoms))
    scores = {label: sum(e.total for e in episodes) / len(episodes) for label, episodes in policies}
    low, top = declared
    warn_at = low + (top - low) / 2
    measured = {"mean_return": scores, "declared_range": [low, top], "warn_at": warn_at, "fail_at": top}
    lines = [f"{label} earns {score:g} per episode" for label, score in scores.items()]
    worst = max(scores, key=lambda label: scores[label])
    fix = (
        "make the reward depend on solving the task: a verifier must give an empty, constant or random answer "
        "a low reward"
    )
    if scores[worst] >= top:
        evidence = [f"{worst} earns the top of the declared range ({top:g})", *lines]
        return Finding(Outcome.FAIL, evidence, measured, fix, Severity.FAIL)
    if scores[worst] >= warn_at:
        evidence = [f"{worst} earns at least half way up the declared range ({warn_at:g})", *lines]
        return Finding(Outcome.FAIL, evidence, measured, fix, Severity.WARN)
    return Finding.passed(
        f"every trivial policy earns under {warn_at:g}, half way up [{low:g}, {top:g}]", *lines, **measured
    )
