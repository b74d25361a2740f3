"""The quality checks of episodes (RFC 008's runtime checks a hub runs), and all the checks in the order they run.

Each is an async function of the run that returns a `Finding`. Episodes are played by the random baseline of
evaluations with fixed seeds, then replayed action for action: the same seed and actions must give the same
observations, rewards and done flags, compared whole as canonical JSON (nothing is ignored; a replay sends
the same `episode_id`, so ids the server echoes agree). The reward checks are in conformance.quality.rewards.
"""

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from conformance.context import excerpt, one_at_a_time, unless_queued
from conformance.quality.episodes import AtCapacity, Episode, first_difference, keep, play, replay
from conformance.quality.rewards import reward_well_formed, trivial_policy_floor
from conformance.quality.run import NO_ACTION_FIX, Finding, Run
from core.outbound import OutboundSession

__all__ = ["CHECKS", "Check"]

SEED_STEPS = 5  # actions replayed under two seeds
DETERMINISM_STEPS = 50  # the most steps of the replayed episode
STATE_STEPS = 3
ISOLATION_STEPS = 6
TERMINATION_SEEDS = (100, 101, 102)

SEED_FIX = (
    "derive every random choice from reset(seed=...) (e.g. self._rng = random.Random(seed) in reset), never from "
    "the global random module, the clock or state left by an earlier episode or session"
)


@dataclass(frozen=True)
class Check:
    check_id: str
    run: Callable[[Run], Awaitable[Finding]]


def _actions(count: int) -> str:
    return f"{count} action" if count == 1 else f"{count} actions"


async def seed_control(run: Run) -> Finding:
    """Two resets with the same seed and the same actions agree; a different seed is allowed to differ."""
    steps = 0 if run.no_action else SEED_STEPS
    eid = run.episode_id("seed")
    async with run.session("seed 1") as session:
        first = await play(session, run.random(1), seed=1, episode_id=eid, max_steps=steps)
        again = await replay(session, seed=1, episode_id=eid, actions=first.actions)
    async with run.session("seed 2") as session:
        other = await replay(session, seed=2, episode_id=eid, actions=first.actions)
    run.keep(first, again, other)
    what = f"the reset and {_actions(len(first.actions))}" if first.actions else "the reset (no action to send)"
    measured = {"seeds": [1, 2], "compared": what}
    differs = first_difference(first, again)
    if differs is not None:
        return Finding.failed(
            [f"two episodes reset with seed 1, sent the same actions, differ at {differs}"],
            SEED_FIX,
            **measured,
            same_seed_agrees=False,
        )
    apart = first_difference(first, other)
    if apart is None:
        return Finding.passed(
            f"the same seed gave the same episode over {what}",
            "seeds 1 and 2 gave the same episode too: no randomness showed for a seed to control",
            **measured,
            same_seed_agrees=True,
            seeds_differ=False,
        )
    return Finding.passed(
        f"the same seed gave the same episode over {what}",
        f"seeds 1 and 2 gave different episodes (first at {apart})",
        **measured,
        same_seed_agrees=True,
        seeds_differ=True,
    )


async def _replay_on_replicas(run: Run, reference: Episode) -> tuple[list[tuple[str, Episode]], str]:
    replicas = run.target.replicas
    if replicas is None:
        return [], "not compared: the target is a URL, so its replicas (if any) cannot be told apart"
    if len(replicas) < 2:
        return [], f"not compared: the pool has {len(replicas)} ready replica(s); launch with 2 or more to compare"
    runs = []
    for replica in replicas[:2]:
        guard = run.guard.with_trusted(replica.url)
        outbound = OutboundSession(guard, timeout_s=run.timeout_s, headers=replica.headers)
        try:
            name = f"replica {replica.id}"
            async with run.session(name, base=replica.url, outbound=outbound, replica=replica.id) as session:
                episode = await replay(
                    session, seed=reference.seed, episode_id=reference.episode_id, actions=reference.actions
                )
        finally:
            await outbound.aclose()
        runs.append((f"replica {replica.id}", episode))
    return runs, f"compared replicas {replicas[0].id} and {replicas[1].id}"


async def episode_determinism(run: Run) -> Finding:
    """A seeded random-policy episode, replayed in the same session, a new one, and on two replicas of a pool."""
    if run.no_action:
        return Finding.skipped(run.no_action, NO_ACTION_FIX)
    eid = run.episode_id("determinism")
    steps = min(run.max_steps, DETERMINISM_STEPS)
    async with run.session("determinism") as session:
        reference = await play(session, run.random(3), seed=3, episode_id=eid, max_steps=steps)
        again = await replay(session, seed=3, episode_id=eid, actions=reference.actions)
    runs = [("a second episode of the same session", again)]
    async with run.session("determinism, again") as session:
        runs.append(("a new session", await replay(session, seed=3, episode_id=eid, actions=reference.actions)))
    on_replicas, replicas_note = await _replay_on_replicas(run, reference)
    runs += on_replicas
    run.reference = reference
    run.keep(reference, *(episode for _, episode in runs))
    differences = [(label, first_difference(reference, episode)) for label, episode in runs]
    differing = [f"{label} differs at {where}" for label, where in differences if where is not None]
    run.deterministic = not differing
    measured = {
        "seed": 3,
        "actions": len(reference.actions),
        "compared_with": [label for label, _ in runs],
        "cross_replica": replicas_note,
        "ignored_fields": [],
    }
    same = f"seed 3 and the same {_actions(len(reference.actions))}"
    if differing:
        return Finding.failed([f"{same}: {line}" for line in differing], SEED_FIX, **measured)
    return Finding.passed(
        f"{same} gave identical observations, rewards and done flags in {' and in '.join(label for label, _ in runs)}",
        f"across replicas: {replicas_note}",
        **measured,
    )


def _accepted_prefix(reference: Episode | None, most: int) -> list[dict[str, Any]]:
    """The reference's first actions, up to the first one the server refused."""
    actions: list[dict[str, Any]] = []
    if reference is not None:
        for action, turn in zip(reference.actions, reference.turns[1:], strict=False):
            if turn.error is not None or len(actions) == most:
                break
            actions.append(action)
    return actions


async def state_contract(run: Run) -> Finding:
    """`state` echoes the episode_id sent to reset, and its step_count counts the steps taken."""
    eid = run.episode_id("state")
    actions = _accepted_prefix(run.reference, STATE_STEPS) if run.reference else []
    problems, evidence = [], []
    async with run.session("state") as session:
        await session.reset(seed=3, episode_id=eid)
        state = await session.state()
        if isinstance(state.get("max_steps"), int) and not isinstance(state["max_steps"], bool):
            run.state_max_steps = state["max_steps"] if state["max_steps"] > 0 else None
        if state.get("episode_id") != eid:
            problems.append(
                f"state.episode_id is {excerpt(state.get('episode_id'), 60)}, not the {eid!r} sent to reset"
            )
        if state.get("step_count") != 0:
            problems.append(f"step_count is {excerpt(state.get('step_count'), 40)} right after reset, not 0")
        for taken, action in enumerate(actions, start=1):
            turn = await session.step(action)
            if turn.error is not None:
                evidence.append(f"step {taken} was refused ({turn.error}); step_count was checked up to it")
                break
            count = (await session.state()).get("step_count")
            if count != taken:
                problems.append(f"step_count is {excerpt(count, 40)} after {taken} step(s), not {taken}")
                break
    measured = {"episode_id_sent": eid, "steps_taken": len(actions)}
    if problems:
        fix = "return State(episode_id=<the episode_id given to reset>, step_count=<steps since reset>) from state"
        return Finding.failed(problems + evidence, fix, **measured)
    counted = ", ".join(str(n) for n in range(len(actions) + 1))
    steps = f"step_count {counted} after each step" if actions else "step_count 0 (no action to step with)"
    return Finding.passed(f"episode_id echoed; {steps}", *evidence, **measured)


async def _together(run: Run, a: Episode, b: Episode) -> tuple[list[Episode], list[dict[str, Any]]] | None:
    """The two episodes replayed at once, their steps interleaved, and each session's state after; None when the
    endpoint's pool queued the second session (it holds one at a time)."""
    async with run.session("together A") as first, run.session("together B") as second:
        sessions = (first, second)
        together = [Episode(a.seed, a.episode_id, [keep(await first.reset(seed=a.seed, episode_id=a.episode_id))])]
        # A fresh pool learns what its server holds from the first session the server refuses: the second, maybe.
        reset = await unless_queued(second.reset(seed=b.seed, episode_id=b.episode_id), run.target.server_capacity)
        if reset is None:
            return None
        together.append(Episode(b.seed, b.episode_id, [keep(reset)]))
        for index in range(max(len(a.actions), len(b.actions))):
            for session, played, episode in zip(sessions, (a, b), together, strict=True):
                if index < len(played.actions) and not episode.done:
                    episode.actions.append(played.actions[index])
                    episode.turns.append(keep(await session.step(played.actions[index])))
        return together, [await first.state(), await second.state()]


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
        async with run.session(f"alone {name}") as session:
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
    run.keep(*alone, *together)
    problems = []
    both = sum(len(e.actions) for e in together)
    for name, other, played, episode, state in zip("AB", (b, a), alone, together, states, strict=True):
        if state.get("episode_id") == other.episode_id:
            problems.append(f"session {name}'s state reports the other session's episode {other.episode_id!r}")
        if state.get("step_count") == both != len(episode.actions):
            problems.append(f"session {name}'s step_count is {both}, the steps of both sessions")
        where = first_difference(played, episode) if run.deterministic else None
        if where is not None:
            problems.append(f"session {name}, played beside the other, differs from the same episode alone at {where}")
    measured = {"seeds": [a.seed, b.seed], "steps": [len(a.actions), len(b.actions)]}
    if run.deterministic:
        compared = "each played the same observations, rewards and done flags as alone"
    else:
        compared = "observations not compared: the environment is not deterministic (runtime.episode_determinism)"
    if problems:
        fix = "keep all episode state on the Environment instance (one per session), none in module or class variables"
        return Finding.failed([*problems, compared], fix, **measured)
    return Finding.passed(f"two sessions at once, steps interleaved: each kept its own state; {compared}", **measured)


async def episode_termination(run: Run) -> Finding:
    """Random-policy episodes end within the declared budget (steps, and the manifest's episode_timeout_s)."""
    if run.no_action:
        return Finding.skipped(run.no_action, NO_ACTION_FIX)
    budget, timeout = run.max_steps, run.declared.episode_timeout_s
    measured: dict[str, Any] = {
        "budget_steps": budget,
        "budget_source": run.budget_source,
        "episode_timeout_s": timeout,
    }
    episodes, problems, inconclusive = [], [], []
    async with run.session("termination") as session:
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
    run.random_episodes = episodes
    run.keep(*episodes)
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


CHECKS: tuple[Check, ...] = (
    Check("runtime.seed_control", seed_control),
    Check("runtime.episode_determinism", episode_determinism),
    Check("runtime.state_contract", state_contract),
    Check("runtime.episode_isolation", episode_isolation),
    Check("runtime.episode_termination", episode_termination),
    Check("runtime.reward_well_formed", reward_well_formed),
    Check("semantic.trivial_policy_floor", trivial_policy_floor),
)
