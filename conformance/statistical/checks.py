"""The seven checks RFC 008 reserves for a hub, each an async function of the lane, registered in the engine's
`Registry` `CHECKS` with the severity the gate policy gives it."""

from collections.abc import Callable
from typing import Any

from conformance.engine import CheckFn, Finding, Level, Registry
from conformance.statistical.figures import Z
from conformance.statistical.gate import GATE
from conformance.statistical.lane import RANGE_FIX, Lane, Played, per_task
from conformance.statistical.oracle import PLAYED, OracleRun

__all__ = ["CHECKS"]

CHECKS: Registry[Lane] = Registry(Level.STATISTICAL)
PRESET_FIX = "pick a model preset for the run, or have the admin set ENVHUB_STATISTICAL_REFERENCE_PRESET"


def _check(check_id: str, title: str) -> Callable[[CheckFn[Lane]], CheckFn[Lane]]:
    return CHECKS(check_id, title, GATE.severities[check_id])


def _figure(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def _scored(player: Played) -> str:
    mean, se = player.mean_se()
    return f"{player.label} (evaluation {player.evaluation}): mean reward {_figure(mean)} ± {_figure(se)} SE"


def _bounds(player: Played) -> tuple[float, float]:
    mean, se = player.mean_se()
    return (mean or 0.0) - Z * (se or 0.0), (mean or 0.0) + Z * (se or 0.0)


def _links(*players: Played, episodes: list[str] | None = None) -> dict[str, Any]:
    """What the evidence points at, for the UI to link to the replay."""
    return {"evaluations": [p.evaluation for p in players], "episodes": episodes or []}


@_check("statistical.reward_reachability", "A player (the oracle if declared) reaches the declared maximum")
async def reward_reachability(lane: Lane) -> Finding:
    if lane.declared.reward_range is None:
        return Finding.skipped(f"the maximum cannot be judged: {lane.declared.range_problem}", RANGE_FIX)
    high = lane.declared.reward_range[1]
    tolerance = lane.declared.oracle_tolerance or lane.gate.reach_tolerance * lane.declared.span
    oracle = lane.oracle
    if oracle is not None and oracle.reason == PLAYED:
        return _oracle_reaches(oracle, high, tolerance)
    honest = [p for p in lane.honest if p.episodes]
    best = max(honest, key=lambda p: max(p.rewards), default=None)
    if best is None:
        return Finding.skipped("no honest player finished an episode")
    episode = best.best()
    assert episode is not None
    note: list[str] = []
    measured: dict[str, Any] = {"declared_max": high, "best_reward": episode.reward, "tolerance": tolerance}
    if oracle is not None:
        note = [
            f"the declared oracle ({oracle.form} at {oracle.location}) was not played ({oracle.reason}: "
            f"{oracle.detail}); the reference players stand in for it"
        ]
        measured |= {"oracle": oracle.reason}
    measured |= _links(best, episodes=[episode.id])
    line = f"episode {episode.id} of {best.label} scored {_figure(episode.reward)}; the declared maximum is {high:g}"
    if episode.reward >= high - tolerance:
        return Finding.passed(line, *note, **measured)
    return Finding.failed(
        [line, *note],
        "make the declared maximum reachable (or declare the range players can reach in validation.reward.range), "
        "and declare an oracle that reaches it (validation.capabilities.oracle)",
        **measured,
    )


def _oracle_reaches(oracle: OracleRun, high: float, tolerance: float) -> Finding:
    """The declared oracle, played in the environment's image, judged on the best reward its seeds printed."""
    best = max(oracle.rewards, default=None)
    measured: dict[str, Any] = {"declared_max": high, "best_reward": best, "tolerance": tolerance, "oracle": PLAYED}
    measured |= {"seeds": list(oracle.seeds), "rewards": list(oracle.rewards)}
    line = (
        f"the oracle ({oracle.location}, run in the image) printed rewards {[round(r, 6) for r in oracle.rewards]} "
        f"for seeds {list(oracle.seeds)}; the declared maximum is {high:g}"
    )
    if best is not None and best >= high - tolerance:
        return Finding.passed(line, **measured)
    return Finding.failed(
        [line],
        "make the oracle reach the declared maximum, or declare the maximum it reaches in validation.reward.range",
        **measured,
    )


@_check("statistical.difficulty_separation", "Stronger players score higher, beyond their intervals")
async def difficulty_separation(lane: Lane) -> Finding:
    ranked = [p for p in lane.honest if p.episodes]
    if len(ranked) < 2:
        return Finding.skipped("fewer than two honest players finished an episode")
    weakest, strongest = ranked[0], ranked[-1]
    inverted = [
        (a.label, b.label) for i, a in enumerate(ranked) for b in ranked[i + 1 :] if _bounds(b)[1] < _bounds(a)[0]
    ]
    separated = _bounds(strongest)[0] > _bounds(weakest)[1]
    measured = {
        "order": [p.label for p in ranked],
        "means": {p.label: p.mean_se()[0] for p in ranked},
        "se": {p.label: p.mean_se()[1] for p in ranked},
        "inverted": inverted,
    } | _links(*ranked)
    evidence = [_scored(p) for p in ranked]
    if separated and not inverted:
        return Finding.passed(*evidence, **measured)
    return Finding.failed(
        evidence + [f"{a} scores above {b} beyond their intervals" for a, b in inverted],
        "rewards should tell a stronger player from a weaker one: give partial credit, or add tasks of graded "
        "difficulty so that a better policy scores higher",
        **measured,
    )


@_check("statistical.headroom", "The best non-oracle player stays below the maximum by a margin")
async def headroom(lane: Lane) -> Finding:
    if lane.declared.reward_range is None:
        return Finding.skipped(f"the headroom cannot be judged: {lane.declared.range_problem}", RANGE_FIX)
    honest = [p for p in lane.of_kind("baseline", "model") if p.episodes]
    if not honest:
        return Finding.skipped("no non-oracle player finished an episode")
    best = max(honest, key=lambda p: p.mean_se()[0] or 0.0)
    high, margin = lane.declared.reward_range[1], lane.gate.headroom_margin * lane.declared.span
    mean = best.mean_se()[0] or 0.0
    measured = {"declared_max": high, "best_mean": mean, "margin": margin, "headroom": high - mean} | _links(best)
    if mean <= high - margin:
        return Finding.passed(_scored(best), **measured)
    return Finding.failed(
        [_scored(best), f"it is within {margin:g} of the maximum {high:g}: there is little left to learn"],
        "add harder tasks (or a harder split) so that the reference players leave room to improve",
        **measured,
    )


@_check("statistical.variance_bound", "The same reset and actions give the same rewards")
async def variance_bound(lane: Lane) -> Finding:
    chosen = [e for p in lane.honest for e in p.episodes if e.steps > 0][: lane.replays]
    if not chosen:
        return Finding.skipped("no honest episode took a step to replay")
    bound = lane.gate.judged_tolerance if lane.declared.judged else lane.gate.variance_tolerance
    worst, mismatched, evidence, episodes, evaluations = 0.0, False, [], [], []
    for original in chosen:
        replayed = await lane.replay(original)
        again = replayed.again.episodes[0] if replayed.again.episodes else None
        episodes += [original.id] + ([again.id] if again else [])
        evaluations += [original.evaluation, replayed.again.evaluation]
        pairs = list(zip(replayed.rewards, replayed.rewards_again, strict=False))
        differ = len(replayed.rewards) != len(replayed.rewards_again)
        gap = max((abs((a or 0.0) - (b or 0.0)) for a, b in pairs), default=0.0)
        worst, mismatched = max(worst, gap), mismatched or differ
        evidence.append(
            f"episode {original.id} gave step rewards {replayed.rewards}; "
            f"played again as {again.id if again else 'nothing'}: {replayed.rewards_again}"
        )
    measured: dict[str, Any] = {"replayed": len(chosen), "largest_difference": worst, "bound": bound}
    measured |= {
        "steps_differ": mismatched,
        "judged": lane.declared.judged,
        "evaluations": evaluations,
        "episodes": episodes,
    }
    if worst <= bound and not mismatched:
        return Finding.passed(*evidence, **measured)
    return Finding.failed(
        evidence,
        "the same reset (seed or task) and the same actions must give the same rewards: derive every random "
        "choice from the reset's seed, and keep no state across episodes",
        **measured,
    )


@_check("statistical.training_signal", "The model's GRPO groups are expected to have a non-zero advantage")
async def training_signal(lane: Lane) -> Finding:
    models = [p for p in lane.of_kind("model") if p.episodes]
    if not models:
        return Finding.skipped("no model played: P(signal) is the chosen model's", PRESET_FIX)
    model = models[0]
    tasks = per_task(model, lane.k, lane.group)
    teaching = [t for t in tasks if 0 < t.passes < t.n]
    share = len(teaching) / len(tasks)
    expected = sum(t.p_signal for t in tasks) / len(tasks)
    measured = {
        "model": model.label,
        "group_size": lane.group,
        "tasks": len(tasks),
        "tasks_with_signal": len(teaching),
        "share_of_tasks": share,
        "share_of_groups": expected,
        "per_task": [
            {
                "task": t.task,
                "n": t.n,
                "pass_rate": t.pass_rate,
                "p_signal": t.p_signal,
                "p_signal_interval": list(t.p_signal_interval),
            }
            for t in tasks
        ],
    } | _links(model)
    line = (
        f"{model.label}: {len(teaching)} of {len(tasks)} tasks have 0 < p < 1; with groups of {lane.group}, "
        f"{expected:.0%} of GRPO groups are expected to have a non-zero advantage"
    )
    if expected >= lane.gate.min_signal_share:
        return Finding.passed(line, **measured)
    solved = sum(t.passes == t.n for t in tasks)
    return Finding.failed(
        [line, f"{solved} tasks were always solved, {len(tasks) - solved - len(teaching)} never"],
        "GRPO learns only from groups whose rewards differ: add tasks this model sometimes solves, or give "
        "partial credit so that rewards within a group differ",
        **measured,
    )


@_check("statistical.adversarial_floor", "The adversarial panel scores at most the floor")
async def adversarial_floor(lane: Lane) -> Finding:
    panel = [p for p in lane.of_kind("adversarial") if p.episodes]
    if not panel:
        return Finding.skipped("no adversarial player finished an episode")
    low = lane.declared.reward_range[0] if lane.declared.reward_range else 0.0
    margin = lane.declared.floor_margin
    margin = margin if margin is not None else lane.gate.floor_margin * lane.declared.span
    worst = max(panel, key=lambda p: p.mean_se()[0] or 0.0)
    mean = worst.mean_se()[0] or 0.0
    best = worst.best()
    measured = {
        "floor": low,
        "floor_declared": lane.declared.reward_range is not None,
        "margin": margin,
        "means": {p.label: p.mean_se()[0] for p in panel},
    } | _links(*panel, episodes=[best.id] if best else [])
    evidence = [_scored(p) for p in panel]
    if lane.declared.reward_range is None:
        evidence.append("no reward range is declared: the floor is taken as 0")
    if mean <= low + margin:
        return Finding.passed(*evidence, **measured)
    return Finding.failed(
        evidence + ([f"episode {best.id} of {worst.label} scored {_figure(best.reward)}"] if best else []),
        "the verifier pays actions that do nothing: check the answer itself, refuse or score at the floor empty, "
        "malformed and out-of-range actions",
        **measured,
    )


@_check("statistical.gameability_gap", "The honest best beats the best adversarial score by a margin")
async def gameability_gap(lane: Lane) -> Finding:
    panel = [p for p in lane.of_kind("adversarial") if p.episodes]
    honest = [p for p in lane.honest if p.episodes]
    if not panel or not honest:
        return Finding.skipped("the gap needs both an honest and an adversarial player's episodes")
    best_honest = max(honest, key=lambda p: p.mean_se()[0] or 0.0)
    best_panel = max(panel, key=lambda p: p.mean_se()[0] or 0.0)
    gap = (best_honest.mean_se()[0] or 0.0) - (best_panel.mean_se()[0] or 0.0)
    least = lane.gate.min_gap * lane.declared.span
    measured = {"gap": gap, "least": least} | _links(best_honest, best_panel)
    evidence = [_scored(best_honest), _scored(best_panel), f"the gap is {gap:.3g} (at least {least:g} wanted)"]
    if gap >= least:
        return Finding.passed(*evidence, **measured)
    return Finding.failed(
        evidence,
        "an adversarial policy scores about as well as an honest one: the reward can be gamed; score the answer, "
        "not the action's shape",
        **measured,
    )
