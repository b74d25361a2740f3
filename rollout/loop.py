"""The episode loop: reset, then ask the player for a move and step, until the environment says done, the
step budget is spent, or the player finds no valid action in its tries. Every caller plays through it: an
evaluation, the quality suite's episodes, and a model playing in the browser one move per tick.

The loop is an async generator of what happens, turn by turn, over a small session protocol (`Env`): the
caller records what it wants of each event, stops early on a budget of its own (tokens, time) by leaving the
loop, and paces it as it likes. What ends the session (a lost connection) is the env's exception, and passes
through.
"""

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any, Protocol

from rollout.players import Move, Player

__all__ = ["End", "Env", "Event", "RefusedReset", "Reset", "Stepped", "Tried", "Turn", "episode"]

RETRIES = 3  # invalid tries allowed per step, after the first, before the episode ends


@dataclass(frozen=True)
class Turn:
    """What a reset or a step got: an observation with its reward and done flag, or the server's refusal (the
    message of the error it sent instead); and how long the environment took."""

    observation: Any = None
    reward: Any = None
    done: bool = False
    error: str | None = None
    env_ms: float = 0.0


class Env(Protocol):
    """One session on an environment. A refused step is a turn with its error; a lost session raises."""

    async def reset(self, options: dict[str, Any]) -> Turn: ...

    async def step(self, action: dict[str, Any]) -> Turn: ...


@dataclass(frozen=True)
class Reset:
    """The episode began: the reset's turn."""

    turn: Turn


@dataclass(frozen=True)
class Tried:
    """A move that was not a step: the player gave no valid action, or the server refused it (`turn` is then
    the refusal)."""

    move: Move
    problem: str
    turn: Turn | None = None


@dataclass(frozen=True)
class Stepped:
    """A step the environment took, with the tries that came before it."""

    move: Move
    turn: Turn
    tries: tuple[Tried, ...] = ()


@dataclass(frozen=True)
class End:
    """The episode stopped before done: why (and its code, max_steps or no_valid_action), and whether it was its step
    budget (a cut, not a failure)."""

    reason: str
    code: str
    cut: bool = False


Event = Reset | Tried | Stepped | End


class RefusedReset(Exception):
    """The server refused the reset: the message of the error it sent."""


async def episode(
    env: Env,
    player: Player,
    *,
    reset: dict[str, Any] | None = None,
    start: Turn | None = None,
    max_steps: int,
    retries: int = RETRIES,
) -> AsyncGenerator[Event, None]:
    """Play one episode: from a reset with these options, or on from `start`, the turn an episode already
    reached. Yields each event; an `End` last when it stopped before done."""
    reward = None
    if start is None:
        start = await env.reset(reset or {})
        if start.error is not None:
            raise RefusedReset(start.error)
        yield Reset(start)
    else:
        reward = start.reward
    observation, done, steps = start.observation, start.done, 0
    while not done:
        if steps >= max_steps:
            yield End(f"the episode reached its limit of {max_steps} steps", "max_steps", cut=True)
            return
        move = await player.act(observation, reward)
        tries: list[Tried] = []
        while True:
            turn = None if move.action is None else await env.step(move.action)
            if turn is not None and turn.error is None:
                break
            problem = turn.error if turn is not None and turn.error else move.problem or "no action was given"
            tried = Tried(move, problem, turn)
            tries.append(tried)
            yield tried
            if len(tries) > retries:
                yield End(f"no valid action in {len(tries)} tries; the last problem: {problem}", "no_valid_action")
                return
            move = await player.retry(problem)
        steps += 1
        yield Stepped(move, turn, tuple(tries))
        observation, reward, done = turn.observation, turn.reward, turn.done
