"""Sessions and episodes as the quality checks play them: a raw /ws session, episodes played by a policy's
player through rollout's episode loop or replayed action by action, and where two episodes first differ, in
canonical JSON.

Like the checklist, the quality suite speaks the wire itself (protocol.frames), so that it sees every frame
as sent; openenv's client would also cost seconds of imports. Every reply is bounded by the session's timeout.
An episode keeps of each turn only its digest (the sha256 of its canonical JSON, and of its members down to a
bound, each with a short excerpt), never the observation: a report's memory does not grow with what a server
sends, and two turns still compare whole, with the first place they differ named.
"""

import asyncio
import contextlib
import hashlib
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from conformance.context import excerpt
from core.outbound import OutboundSession
from protocol import frames
from protocol.frames import error_code
from rollout import loop
from rollout.loop import RETRIES, Turn
from rollout.players import Move, Player

__all__ = [
    "AtCapacity",
    "Constant",
    "Digest",
    "Episode",
    "Kept",
    "Lost",
    "Session",
    "SessionError",
    "canonical",
    "digest",
    "first_difference",
    "keep",
    "play",
    "replay",
]

DIGEST_DEPTH = 4  # levels of members a digest keeps below a turn: the observation's fields, and theirs
DIGEST_MEMBERS = 64  # members a turn's digest keeps in all, level by level
EXCERPT_CHARS = 80
REWARD_CHARS = 200  # a reward longer than this as JSON (so not a number) is kept as its excerpt


class SessionError(Exception):
    """The session could not go on: what happened, in a sentence."""


class Lost(SessionError):
    """The server closed the session, stopped answering, or could not be reached."""


class AtCapacity(SessionError):
    """The server refused the session: it holds all it can (CAPACITY_REACHED)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        super().__init__(f"the server refused the session at capacity: {excerpt(data.get('message'), 160)}")


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


def _error_text(frame: dict[str, Any]) -> str:
    data = frame.get("data")
    data = data if isinstance(data, dict) else {}
    return f"{data.get('code') or 'ERROR'}: {excerpt(data.get('message'), 200)}"


class Session:
    """One WebSocket session on /ws."""

    def __init__(self, conn: ClientConnection, timeout_s: float, name: str) -> None:
        self.conn = conn
        self.timeout_s = timeout_s
        self.name = name
        self.on_answered: Callable[[], None] = lambda: None  # told once, at the first reply that is not a refusal

    @classmethod
    async def open(cls, outbound: OutboundSession, base: str, *, timeout_s: float, name: str = "") -> "Session":
        url = "ws" + base.rstrip("/").removeprefix("http") + "/ws"
        try:
            conn = await outbound.websocket(url, open_timeout_s=timeout_s)
        except InvalidStatus as exc:
            raise Lost(f"opening {url} was answered with HTTP {exc.response.status_code}") from exc
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            raise Lost(f"opening {url} failed: {type(exc).__name__}: {exc}".rstrip(": ")) from exc
        return cls(conn, timeout_s, name or url)

    async def _exchange(self, frame: dict[str, Any], what: str) -> dict[str, Any]:
        # A refused session sends its error frame, then closes: the frame may still be there to read.
        with contextlib.suppress(ConnectionClosed):
            await self.conn.send(json.dumps(frame))
        try:
            async with asyncio.timeout(self.timeout_s):
                raw = await self.conn.recv()
        except TimeoutError as exc:
            raise Lost(f"the server sent no reply to {what} within {self.timeout_s:g} s") from exc
        except ConnectionClosed as exc:
            code = (
                f" (code {exc.rcvd.code}{' ' + repr(exc.rcvd.reason) if exc.rcvd.reason else ''})" if exc.rcvd else ""
            )
            raise Lost(f"the server closed the session{code} instead of answering {what}") from exc
        try:
            reply = json.loads(raw)
        except ValueError as exc:
            raise SessionError(f"the reply to {what} is not JSON: {excerpt(raw, 120)}") from exc
        if not isinstance(reply, dict):
            raise SessionError(f"the reply to {what} is not a JSON object: {excerpt(raw, 120)}")
        capacity = frames.capacity(reply)
        if capacity is not None:
            raise AtCapacity(capacity)
        answered, self.on_answered = self.on_answered, lambda: None
        answered()
        return reply

    @staticmethod
    def _turn(reply: dict[str, Any], what: str) -> Turn:
        if error_code(reply) is not None:
            return Turn(error=_error_text(reply))
        data = reply.get("data")
        if reply.get("type") != "observation" or not isinstance(data, dict):
            raise SessionError(f"{what} got {excerpt(reply, 160)}, not an observation frame")
        return Turn(data.get("observation"), data.get("reward"), data.get("done") is True)

    async def reset(self, **options: Any) -> Turn:
        """Reset with these options (seed, episode_id); SessionError when the server refuses it."""
        turn = self._turn(await self._exchange(frames.reset_frame(options), "reset"), "reset")
        if turn.error is not None:
            raise SessionError(f"reset with {excerpt(options, 120)} was refused: {turn.error}")
        return turn

    async def step(self, action: dict[str, Any]) -> Turn:
        """One step; an error frame (a refused action) is a turn too."""
        return self._turn(await self._exchange(frames.step_frame(action), "a step"), "a step")

    async def state(self) -> dict[str, Any]:
        reply = await self._exchange(frames.STATE, "state")
        data = reply.get("data")
        if reply.get("type") != "state" or not isinstance(data, dict):
            raise SessionError(f"state got {excerpt(reply, 160)}, not a state frame")
        return data

    async def close(self) -> None:
        try:
            async with asyncio.timeout(2):
                await self.conn.send(json.dumps(frames.CLOSE))
                await self.conn.close()
        except (TimeoutError, ConnectionClosed, OSError):
            pass


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

    session: Session

    async def reset(self, options: dict[str, Any]) -> Turn:
        return await self.session.reset(**options)

    async def step(self, action: dict[str, Any]) -> Turn:
        return await self.session.step(action)


async def play(
    session: Session, player: Player, *, seed: int | None, episode_id: str, max_steps: int, retries: int = RETRIES
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


async def replay(session: Session, *, seed: int | None, episode_id: str, actions: list[dict[str, Any]]) -> Episode:
    """Reset, then send these actions in order (until done): an episode to compare with the one that chose them."""
    episode = Episode(seed, episode_id, [keep(await session.reset(seed=seed, episode_id=episode_id))])
    for action in actions:
        if episode.done:
            break
        episode.actions.append(action)
        episode.turns.append(keep(await session.step(action)))
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
