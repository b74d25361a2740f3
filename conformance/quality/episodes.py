"""Episodes as the quality checks play them, on sessions of the shared protocol client (envclient.ws): played
by a policy's player through rollout's episode loop or replayed action by action, and where two episodes first
differ, in canonical JSON.

An episode keeps of each turn only its digest (the sha256 of its canonical JSON, and of its members down to a
bound, each with a short excerpt), never the observation: a report's memory does not grow with what a server
sends, and two turns still compare whole, with the first place they differ named.
"""

import hashlib
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from conformance.context import excerpt
from envclient.ws import AtCapacity, PinnedClient, Refused, Result
from rollout import loop
from rollout.loop import RETRIES, Turn
from rollout.players import Move, Player

__all__ = [
    "Constant",
    "Digest",
    "Episode",
    "Kept",
    "canonical",
    "digest",
    "first_difference",
    "keep",
    "play",
    "replay",
    "reset_turn",
    "step_turn",
]

DIGEST_DEPTH = 4  # levels of members a digest keeps below a turn: the observation's fields, and theirs
DIGEST_MEMBERS = 64  # members a turn's digest keeps in all, level by level
EXCERPT_CHARS = 80
REWARD_CHARS = 200  # a reward longer than this as JSON (so not a number) is kept as its excerpt


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass
class Digest:
    """A JSON value as a report keeps it: the sha256 of its canonical JSON and an excerpt, and, while the bound
    lasts, the same of its members (an object's by key, an array's by index)."""

    sha: bytes
    excerpt: str
    is_object: bool = False
    members: dict[str, "Digest"] | None = None  # None: not kept (a plain value, or past the bound)


def _node(value: Any) -> Digest:
    sha = hashlib.sha256(canonical(value).encode()).digest()
    return Digest(sha, excerpt(value, EXCERPT_CHARS), isinstance(value, dict))


def _members(value: Any) -> list[tuple[str, Any]] | None:
    if isinstance(value, dict):
        return [(str(key), value[key]) for key in sorted(value, key=str)]
    if isinstance(value, list):
        return [(str(index), item) for index, item in enumerate(value)]
    return None


def digest(value: Any) -> Digest:
    """The value's digest, its members kept breadth first, DIGEST_MEMBERS of them at most, DIGEST_DEPTH deep."""
    root = _node(value)
    budget = DIGEST_MEMBERS
    pending = deque([(root, value, 0)])
    while pending:
        node, held, depth = pending.popleft()
        members = _members(held)
        if members is None or depth >= DIGEST_DEPTH or len(members) > budget:
            continue
        budget -= len(members)
        node.members = {}
        for key, member in members:
            node.members[key] = child = _node(member)
            pending.append((child, member, depth + 1))
    return root


@dataclass(frozen=True)
class Kept:
    """What an episode keeps of a turn: its digest, reward (a number, or the excerpt of what was sent instead),
    done flag and error."""

    digest: Digest
    reward: Any = None
    done: bool = False
    error: str | None = None


def _comparable(turn: Turn) -> dict[str, Any]:
    if turn.error is not None:
        return {"error": turn.error}
    return {"observation": turn.observation, "reward": turn.reward, "done": turn.done}


def keep(turn: Turn) -> Kept:
    """A turn as an episode keeps it, its observation let go."""
    reward = turn.reward
    if not isinstance(reward, int | float | None) and len(canonical(reward)) > REWARD_CHARS:
        reward = excerpt(reward, REWARD_CHARS)
    return Kept(digest(_comparable(turn)), reward, turn.done, turn.error)


def _error_text(data: dict[str, Any]) -> str:
    return f"{data.get('code') or 'ERROR'}: {excerpt(data.get('message'), 200)}"


def _turn(result: Result) -> Turn:
    return Turn(result.observation, result.reward, result.done)


async def reset_turn(client: PinnedClient, **options: Any) -> Turn:
    """Reset with these options (seed, episode_id); Refused (a SessionError) when the server refuses it."""
    return _turn(await client.reset(**options))


async def step_turn(client: PinnedClient, action: dict[str, Any]) -> Turn:
    """One step; an action the server refuses is a turn too, with the error it sent (the server being full is not)."""
    try:
        return _turn(await client.step(action))
    except AtCapacity:
        raise
    except Refused as exc:
        return Turn(error=_error_text(exc.data))


@dataclass
class Episode:
    """One episode: the reset's turn, then one per action sent (refused ones too), and why it stopped early."""

    seed: int | None
    episode_id: str
    turns: list[Kept]
    actions: list[dict[str, Any]] = field(default_factory=list)
    ended: str | None = None  # why it stopped before done: its step budget, refusals, no action

    @property
    def done(self) -> bool:
        return self.turns[-1].done

    @property
    def steps(self) -> int:
        return sum(t.error is None for t in self.turns[1:])

    @property
    def refused(self) -> int:
        return sum(t.error is not None for t in self.turns[1:])

    @property
    def step_rewards(self) -> list[Any]:
        return [t.reward for t in self.turns[1:] if t.error is None]

    @property
    def total(self) -> float:
        """The return: the sum of the numeric step rewards."""
        return sum(float(r) for r in self.step_rewards if isinstance(r, int | float) and not isinstance(r, bool))


@dataclass
class Constant:
    """A player that sends the same action every step."""

    action: dict[str, Any]

    async def act(self, observation: Any, reward: Any) -> Move:
        return Move(self.action)

    async def retry(self, problem: str) -> Move:
        return Move(None, problem=f"the same action again would be refused again ({problem})")


@dataclass
class _Env:
    """The episode loop's view of a session."""

    client: PinnedClient

    async def reset(self, options: dict[str, Any]) -> Turn:
        return await reset_turn(self.client, **options)

    async def step(self, action: dict[str, Any]) -> Turn:
        return await step_turn(self.client, action)


async def play(
    session: PinnedClient, player: Player, *, seed: int | None, episode_id: str, max_steps: int, retries: int = RETRIES
) -> Episode:
    """Reset, then step with the player's moves (rollout's episode loop) until done, the step budget, or
    `retries` invalid tries after the first in one step. Refused actions are kept as turns."""
    episode = Episode(seed, episode_id, [])
    events = loop.episode(_Env(session), player, reset={"seed": seed, "episode_id": episode_id},
                          max_steps=max_steps, retries=retries)  # fmt: skip
    async for event in events:
        if isinstance(event, loop.Reset):
            episode.turns.append(keep(event.turn))
        elif isinstance(event, loop.End):
            episode.ended = event.reason
        elif event.turn is not None and event.move.action is not None:  # a step, or an action the server refused
            episode.actions.append(event.move.action)
            episode.turns.append(keep(event.turn))
    return episode


async def replay(session: PinnedClient, *, seed: int | None, episode_id: str, actions: list[dict[str, Any]]) -> Episode:
    """Reset, then send these actions in order (until done): an episode to compare with the one that chose them."""
    episode = Episode(seed, episode_id, [keep(await reset_turn(session, seed=seed, episode_id=episode_id))])
    for action in actions:
        if episode.done:
            break
        episode.actions.append(action)
        episode.turns.append(keep(await step_turn(session, action)))
    return episode


def _where(a: Digest | None, b: Digest | None, path: str) -> tuple[str, str, str]:
    """The first path at which two digested values differ, and an excerpt of each there."""
    if a is not None and b is not None and a.members is not None and b.members is not None:
        if a.is_object and b.is_object:
            for key in sorted(set(a.members) | set(b.members)):
                x, y = a.members.get(key), b.members.get(key)
                if x is None or y is None or x.sha != y.sha:
                    return _where(x, y, f"{path}.{key}" if path else key)
        elif not a.is_object and not b.is_object and len(a.members) == len(b.members):
            for index in range(len(a.members)):
                x, y = a.members[str(index)], b.members[str(index)]
                if x.sha != y.sha:
                    return _where(x, y, f"{path}[{index}]")
    missing = excerpt(None)
    return path or "the whole turn", a.excerpt if a else missing, b.excerpt if b else missing


def first_difference(a: Episode, b: Episode) -> str | None:
    """Where two episodes first differ, in a sentence; None when every turn is the same."""
    for index, (x, y) in enumerate(zip(a.turns, b.turns, strict=False)):
        if x.digest.sha != y.digest.sha:
            where, first, second = _where(x.digest, y.digest, "")
            turn = "the reset" if index == 0 else f"step {index}"
            return f"{turn}, {where}: {first} vs {second}"
    if len(a.turns) != len(b.turns):
        shorter = min(len(a.turns), len(b.turns)) - 1
        return f"after step {shorter} one episode was done and the other went on"
    return None
