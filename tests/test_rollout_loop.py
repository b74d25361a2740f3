"""The episode loop every caller plays through (evaluations, quality episodes, a model in the Play tab): a move
with no action and an action the server refuses are tries asked again, a bounded number of times; a step ends
the tries; the step budget ends an episode as a cut; a loop can go on from a turn an episode already reached."""

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from rollout.loop import End, RefusedReset, Reset, Stepped, Tried, Turn, episode
from rollout.players import Move


@dataclass
class Counter:
    """An environment that counts to `goal` with {"add": 1}, refuses any other action, and refuses a reset that
    asks for a negative seed."""

    goal: int = 3
    count: int = 0
    sent: list[dict[str, Any]] = field(default_factory=list)

    async def reset(self, options: dict[str, Any]) -> Turn:
        if options.get("seed", 0) < 0:
            return Turn(error="INVALID_SEED: seeds are not negative")
        self.count = 0
        return Turn({"count": 0})

    async def step(self, action: dict[str, Any]) -> Turn:
        self.sent.append(action)
        if action != {"add": 1}:
            return Turn(error=f"INVALID_ACTION: {action} is not an action")
        self.count += 1
        return Turn({"count": self.count}, reward=1.0, done=self.count >= self.goal)


@dataclass
class Scripted:
    """A player that makes these moves in order, whether asked to act or to retry; it notes what it was shown."""

    moves: list[Move]
    seen: list[tuple[str, Any]] = field(default_factory=list)

    async def act(self, observation: Any, reward: Any) -> Move:
        self.seen.append(("act", (observation, reward)))
        return self.moves.pop(0)

    async def retry(self, problem: str) -> Move:
        self.seen.append(("retry", problem))
        return self.moves.pop(0)


ADD = Move({"add": 1})


def events(env: Counter, player: Scripted, **options: Any) -> list[Any]:
    async def run() -> list[Any]:
        return [event async for event in episode(env, player, **{"max_steps": 10, **options})]

    return asyncio.run(run())


def test_an_episode_resets_and_steps_until_done_showing_the_player_each_observation_and_reward() -> None:
    env, player = Counter(goal=2), Scripted([ADD, ADD])
    played = events(env, player, reset={"seed": 1})
    assert [type(e) for e in played] == [Reset, Stepped, Stepped]
    assert played[-1].turn.done and played[-1].turn.observation == {"count": 2}
    assert player.seen == [("act", ({"count": 0}, None)), ("act", ({"count": 1}, 1.0))]


def test_no_action_and_a_refused_action_are_tries_the_player_is_asked_again_about() -> None:
    env = Counter(goal=1)
    player = Scripted([Move(None, problem="no JSON object"), Move({"add": 9}), ADD])
    played = events(env, player)
    assert [type(e) for e in played] == [Reset, Tried, Tried, Stepped]
    no_action, refused, stepped = played[1:]
    assert no_action.turn is None and no_action.problem == "no JSON object"
    assert refused.turn.error == refused.problem == "INVALID_ACTION: {'add': 9} is not an action"
    assert stepped.tries == (no_action, refused) and stepped.move == ADD
    assert player.seen[1:] == [("retry", "no JSON object"), ("retry", refused.problem)]
    assert env.sent == [{"add": 9}, {"add": 1}]  # a move without an action sends nothing


def test_an_episode_ends_after_its_tries_with_the_last_problem() -> None:
    env, player = Counter(), Scripted([Move({"add": 2})] * 3)
    played = events(env, player, retries=2)
    assert [type(e) for e in played] == [Reset, Tried, Tried, Tried, End]
    assert played[-1] == End(
        "no valid action in 3 tries; the last problem: INVALID_ACTION: {'add': 2} is not an action", "no_valid_action"
    )


def test_the_step_budget_cuts_an_episode_that_has_not_ended() -> None:
    played = events(Counter(goal=5), Scripted([ADD] * 5), max_steps=2)
    assert [type(e) for e in played] == [Reset, Stepped, Stepped, End]
    assert played[-1] == End("the episode reached its limit of 2 steps", "max_steps", cut=True)


def test_a_loop_goes_on_from_a_turn_the_episode_reached_without_a_reset() -> None:
    env, player = Counter(goal=2, count=1), Scripted([ADD])
    played = events(env, player, start=Turn({"count": 1}, reward=1.0))
    assert [type(e) for e in played] == [Stepped]
    assert player.seen == [("act", ({"count": 1}, 1.0))]


def test_a_refused_reset_raises_with_the_servers_message() -> None:
    with pytest.raises(RefusedReset, match="seeds are not negative"):
        events(Counter(), Scripted([]), reset={"seed": -1})
