"""The hub lane: what openenv's validator leaves to a hub, or does not grade, run against an endpoint's URL.

- `hub.cross_host_determinism` (RFC 008's hub id): a seeded random-policy episode played through the endpoint,
  replayed action for action on two replicas of its pool reached directly; listed only for a pool of two or more.
- `runtime.episode_isolation`: RFC 008's id, which openenv 0.10's validator lists but does not grade ("grader not
  implemented in this build"); the hub runs it on the live endpoint.
- `runtime.episode_termination`: random-policy episodes end within their budget; the validator only bounds its one
  probe episode by `episode_timeout_s`.

What openenv's validator grades (`runtime.reward_well_formed`, `runtime.state_contract`) is left to it
(conformance.validator); seed control and the trivial-policy floor are the statistical lane's
(`statistical.variance_bound`, `statistical.adversarial_floor`). Episodes are played by the random baseline of
evaluations with fixed seeds and compared whole as canonical JSON (a replay sends the same `episode_id`).
"""

import asyncio
from typing import Any

from conformance.context import excerpt, one_at_a_time, unless_queued
from conformance.engine import Finding, Level, Registry
from conformance.quality.episodes import Episode, first_difference, keep, play, replay, reset_turn, step_turn
from conformance.quality.run import NO_ACTION_FIX, Run
from core.outbound import OutboundSession
from envclient.ws import AtCapacity

__all__ = ["CHECKS"]

DETERMINISM_STEPS = 50  # the most steps of the episode replayed on each replica
ISOLATION_STEPS = 6
TERMINATION_SEEDS = (100, 101, 102)

SEED_FIX = (
    "derive every random choice from reset(seed=...) (e.g. self._rng = random.Random(seed) in reset), never from "
    "the global random module, the clock, the host or state left by an earlier episode or session"
)

runtime: Registry[Run] = Registry(Level.RUNTIME)
hub: Registry[Run] = Registry(Level.HUB)


def _actions(count: int) -> str:
    return f"{count} action" if count == 1 else f"{count} actions"


def _a_pool(run: Run) -> bool:
    return run.target.replicas is not None and len(run.target.replicas) >= 2


async def _on_replica(run: Run, replica_id: str, url: str, headers: dict[str, str], reference: Episode) -> Episode:
    outbound = OutboundSession(run.guard.with_trusted(url), timeout_s=run.timeout_s, headers=headers)
    try:
        async with run.session(base=url, outbound=outbound, replica=replica_id) as session:
            return await replay(
                session, seed=reference.seed, episode_id=reference.episode_id, actions=reference.actions
            )
    finally:
        await outbound.aclose()


@hub("hub.cross_host_determinism", "A seeded episode replays identically on two replicas", applies=_a_pool)
async def cross_host_determinism(run: Run) -> Finding:
    """A seeded random-policy episode through the endpoint, replayed on two replicas of its pool reached directly."""
    if run.no_action:
        return Finding.skipped(run.no_action, NO_ACTION_FIX)
    replicas = (run.target.replicas or ())[:2]
    eid = run.episode_id("hosts")
    async with run.session() as session:
        reference = await play(
            session, run.random(3), seed=3, episode_id=eid, max_steps=min(run.max_steps, DETERMINISM_STEPS)
        )
    labels = [f"replica {r.id}" for r in replicas]
    runs = [await _on_replica(run, r.id, r.url, r.headers, reference) for r in replicas]
    differing = [
        f"{label} differs at {where}"
        for label, episode in zip(labels, runs, strict=True)
        if (where := first_difference(reference, episode)) is not None
    ]
    measured = {"seed": 3, "actions": len(reference.actions), "replicas": [r.id for r in replicas]}
    same = f"seed 3 and the same {_actions(len(reference.actions))}"
    if differing:
        return Finding.failed([f"{same}: {line}" for line in differing], SEED_FIX, **measured)
    return Finding.passed(
        f"{same} gave identical observations, rewards and done flags on {' and '.join(labels)}", **measured
    )


async def _together(run: Run, a: Episode, b: Episode) -> tuple[list[Episode], list[dict[str, Any]]] | None:
    """The two episodes replayed at once, their steps interleaved, and each session's state after; None when the
    endpoint's pool queued the second session (it holds one at a time)."""
    async with run.session() as first, run.session() as second:
        sessions = (first, second)
        together = [
            Episode(a.seed, a.episode_id, [keep(await reset_turn(first, seed=a.seed, episode_id=a.episode_id))])
        ]
        # A fresh pool learns what its server holds from the first session the server refuses: the second, maybe.
        reset = await unless_queued(
            reset_turn(second, seed=b.seed, episode_id=b.episode_id), run.target.server_capacity
        )
        if reset is None:
            return None
        together.append(Episode(b.seed, b.episode_id, [keep(reset)]))
        for index in range(max(len(a.actions), len(b.actions))):
            for session, played, episode in zip(sessions, (a, b), together, strict=True):
                if index < len(played.actions) and not episode.done:
                    episode.actions.append(played.actions[index])
                    episode.turns.append(keep(await step_turn(session, played.actions[index])))
        return together, [await first.state(), await second.state()]


async def _replays_alone(run: Run, played: Episode) -> bool:
    """Whether the episode replays identically alone, in a new session: beside another, it is then judged."""
    async with run.session() as session:
        again = await replay(session, seed=played.seed, episode_id=played.episode_id, actions=played.actions)
    return first_difference(played, again) is None


@runtime("runtime.episode_isolation", "Two sessions at once each play what they play alone")
async def episode_isolation(run: Run) -> Finding:
    """Two sessions at once with different seeds, their steps interleaved: each plays what it plays alone, and its
    state is its own."""
    if run.no_action:
        return Finding.skipped(run.no_action, NO_ACTION_FIX)
    single = Finding.skipped("each of the endpoint's servers holds one session at a time: isolation needs two on one")
    if one_at_a_time(run.target.server_capacity):  # its pool would queue the second session
        return single
    alone: list[Episode] = []
    for name, seed in (("A", 11), ("B", 12)):
        async with run.session() as session:
            eid = run.episode_id(name)
            alone.append(await play(session, run.random(seed), seed=seed, episode_id=eid, max_steps=ISOLATION_STEPS))
    a, b = alone
    try:
        replayed = await _together(run, a, b)
    except AtCapacity as exc:
        why = excerpt(exc.data.get("message"), 120)
        return Finding.skipped(f"a second session was refused at capacity ({why}): isolation needs two at once")
    if replayed is None:
        return single
    together, states = replayed
    problems: list[str] = []
    steady = True
    both = sum(len(e.actions) for e in together)
    for name, other, played, episode, state in zip("AB", (b, a), alone, together, states, strict=True):
        if state.get("episode_id") == other.episode_id:
            problems.append(f"session {name}'s state reports the other session's episode {other.episode_id!r}")
        if state.get("step_count") == both != len(episode.actions):
            problems.append(f"session {name}'s step_count is {both}, the steps of both sessions")
        where = first_difference(played, episode)
        if where is None:
            continue
        if await _replays_alone(run, played):
            problems.append(f"session {name}, played beside the other, differs from the same episode alone at {where}")
        else:
            steady = False
    measured = {"seeds": [a.seed, b.seed], "steps": [len(a.actions), len(b.actions)]}
    if steady:
        compared = "each played the same observations, rewards and done flags as alone"
    else:
        compared = "observations not compared: an episode alone differs from itself replayed (not deterministic)"
    if problems:
        fix = "keep all episode state on the Environment instance (one per session), none in module or class variables"
        return Finding.failed([*problems, compared], fix, **measured)
    return Finding.passed(f"two sessions at once, steps interleaved: each kept its own state; {compared}", **measured)


@runtime("runtime.episode_termination", "Random-policy episodes end within their budget")
async def episode_termination(run: Run) -> Finding:
    """Random-policy episodes end within the declared budget (steps, and the manifest's episode_timeout_s)."""
    if run.no_action:
        return Finding.skipped(run.no_action, NO_ACTION_FIX)
    budget, timeout = run.max_steps, run.episode_timeout_s
    measured: dict[str, Any] = {
        "budget_steps": budget,
        "budget_source": run.budget_source,
        "episode_timeout_s": timeout,
    }
    episodes, problems, inconclusive = [], [], []
    async with run.session() as session:
        for seed in TERMINATION_SEEDS:
            try:
                async with asyncio.timeout(timeout):
                    episode = await play(
                        session, run.random(seed), seed=seed, episode_id=run.episode_id(f"t{seed}"), max_steps=budget
                    )
            except TimeoutError:
                problems.append(
                    f"the episode with seed {seed} ran past its declared episode_timeout_s of {timeout:g} s"
                )
                break
            episodes.append(episode)
            if episode.done:
                continue
            if episode.steps >= budget:
                where = f"the budget: {run.budget_source}"
                problems.append(f"the episode with seed {seed} had not ended after {episode.steps} steps ({where})")
                break
            inconclusive.append(f"seed {seed}: {episode.ended}")
    run.reference = episodes[0] if episodes else None
    measured["steps"] = [e.steps for e in episodes]
    if problems:
        fix = "end every episode (done=True) within a step budget, e.g. a max_steps reset option with a default"
        return Finding.failed(problems, fix, **measured)
    ended = [e for e in episodes if e.done]
    if not ended:
        return Finding.skipped(
            "no random-policy episode could be played to its end: " + "; ".join(inconclusive),
            "make sure actions valid under /schema are accepted",
            **measured,
        )
    lengths = ", ".join(str(e.steps) for e in ended)
    return Finding.passed(
        f"{len(ended)} random-policy episodes ended, after {lengths} steps (budget {budget})", *inconclusive, **measured
    )


CHECKS = (*runtime, *hub)
