"""One episode of an evaluation, played by the episode loop (rollout/loop.py) and recorded step by step with
the model's reply, the tries before it, its tokens and times, under the evaluation's limits (steps, tokens,
wall clock). Each record goes to the caller as it is made (a run stores it, evals/steps.py); the episode keeps
only its figures. An environment whose actions are tool calls is played through the endpoint's MCP door
(rollout/door.py); others over its `/ws`."""

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.outbound import OutboundSession
from envclient.ws import PinnedClient, SessionError
from protocol.observations import refusal, reward_number, success
from rollout.harness import Brief
from rollout.loop import RETRIES, RefusedReset, Reset, Stepped, Tried, Turn, episode
from rollout.model import ModelError
from rollout.players import Player, Policy

if TYPE_CHECKING:  # the MCP SDK takes a third of a second to import: only tool-call environments need it
    from rollout.door import DoorClient

__all__ = ["EpisodeResult", "EpisodeSpec", "Keep", "Limits", "play_episode"]

CONNECT_TIMEOUT_S = 10.0
MESSAGE_TIMEOUT_S = 60.0

Keep = Callable[[dict[str, Any]], Awaitable[None]]  # takes each record as it is made: the reset, then each step


@dataclass(frozen=True)
class Limits:
    max_steps: int = 100
    max_tokens: int | None = None  # per episode
    episode_s: float = 600.0
    retries: int = RETRIES  # invalid moves allowed per step before the episode ends


@dataclass(frozen=True)
class EpisodeSpec:
    index: int
    seed: int | None = None
    task: dict[str, Any] | None = None  # reset options besides the seed: a split and index, a dataset row

    def reset_options(self) -> dict[str, Any]:
        return {**(self.task or {}), **({"seed": self.seed} if self.seed is not None else {})}


@dataclass
class EpisodeResult:
    spec: EpisodeSpec
    records: int = 0  # the records made: the reset, each step, each refused action
    steps: int = 0  # the steps the environment took (refused actions are not steps)
    reward: float = 0.0
    final_reward: float | None = None
    success: bool | None = None
    done: bool = False
    invalid: int = 0
    tokens: int = 0
    wall_s: float = 0.0
    error: str | None = None  # why it ended before done: a failure, or a limit when cut
    code: str = ""  # the error's code: max_steps, max_tokens, episode_s, no_valid_action, reset_refused ...
    cut: bool = False  # it reached a limit (steps, tokens, time)
    ended_refused: bool = False  # the environment ended it on an action it refused (a budget of refusals spent)

    @property
    def status(self) -> str:
        if self.done:
            return "invalid" if self.ended_refused else "done"
        return "cut" if self.cut else "failed"


class _End(Exception):
    """The episode fails here, for the reason given, and its code."""

    def __init__(self, reason: str, code: str) -> None:
        super().__init__(reason)
        self.code = code


class _Cut(_End):
    """The episode reached one of its limits."""


@dataclass
class _Env:
    """The loop's session over a client: an error frame is a refused turn, a broken connection ends the episode."""

    client: "PinnedClient | DoorClient"

    async def reset(self, options: dict[str, Any]) -> Turn:
        return await self._call(self.client.reset(**options))

    async def step(self, action: dict[str, Any]) -> Turn:
        return await self._call(self.client.step(action))

    async def _call(self, send: Any) -> Turn:
        self.client.last_error = None
        started = time.perf_counter()
        try:
            outcome = await send
        except (RuntimeError, ValueError) as exc:
            if self.client.last_error is None:
                raise _End(f"the environment's connection failed: {exc}", "connection_failed") from exc
            return Turn(error=str(self.client.last_error.get("message") or self.client.last_error))
        except (SessionError, ConnectionError, OSError) as exc:
            raise _End(f"the environment's connection failed: {exc}", "connection_failed") from exc
        elapsed = (time.perf_counter() - started) * 1000
        return Turn(outcome.observation, outcome.reward, bool(outcome.done), env_ms=elapsed)


@dataclass
class _Episode:
    env: _Env
    player: Player
    limits: Limits
    result: EpisodeResult
    keep: Keep

    async def _record(self, kind: str, turn: Turn, **fields: Any) -> None:
        observation = turn.observation if isinstance(turn.observation, dict) else {"value": turn.observation}
        reward = reward_number(turn.reward)
        if kind == "step" and reward is not None:
            self.result.reward += reward
        self.result.final_reward = reward if kind == "step" else self.result.final_reward
        self.result.done = turn.done
        self.result.success = success(observation)
        record = {
            "kind": kind,
            "index": self.result.records,
            **fields,
            "observation": observation,
            "reward": turn.reward,
            "done": turn.done,
            "env_ms": round(turn.env_ms, 3),
        }
        self.result.records += 1
        await self.keep(record)

    async def play(self, spec: EpisodeSpec) -> None:
        options = spec.reset_options()
        events = episode(self.env, self.player, reset=options, max_steps=self.limits.max_steps,
                         retries=self.limits.retries)  # fmt: skip
        try:
            async for event in events:
                if isinstance(event, Reset):
                    await self._record("reset", event.turn, options=options)
                elif isinstance(event, Tried):
                    self.result.tokens += event.move.tokens
                    self.result.invalid += 1
                elif isinstance(event, Stepped):
                    await self._stepped(event)
                    if not event.turn.done and self._over_tokens():
                        raise _Cut(f"the episode used {self.result.tokens:,} tokens, "
                                   f"its limit is {self.limits.max_tokens:,}", "max_tokens")  # fmt: skip
                else:
                    raise (_Cut if event.cut else _End)(event.reason, event.code)
        except RefusedReset as exc:
            raise _End(f"the environment refused the reset: {exc}", "reset_refused") from exc
        finally:
            await events.aclose()

    def _over_tokens(self) -> bool:
        return self.limits.max_tokens is not None and self.result.tokens >= self.limits.max_tokens

    async def _stepped(self, event: Stepped) -> None:
        """Record a step with the tries before it. An action the environment answers with an error observation
        is a step it refused: an invalid move, kept in the episode (it answered) but not counted among its steps."""
        moves = [*(t.move for t in event.tries), event.move]
        self.result.tokens += event.move.tokens
        refused = refusal(event.turn.observation)
        if refused:
            self.result.invalid += 1
            if event.turn.done:
                self.result.ended_refused = True
                self.result.code = "ended_refused"
                self.result.error = (
                    f"the environment ended the episode on a refused action, after {self.result.invalid} "
                    f"invalid tries and {self.result.steps} steps it took; the last refusal: {refused}"
                )
        else:
            self.result.steps += 1
        await self._record(
            "step",
            event.turn,
            reply=event.move.reply,
            action=event.move.action,
            retries=len(event.tries),
            problems=[{"reply": t.move.reply, "action": t.move.action, "problem": t.problem} for t in event.tries],
            tokens=sum(m.tokens for m in moves),
            model_ms=round(sum(m.model_ms for m in moves), 3),
            **({"refused": refused} if refused else {}),
        )


def _client(url: str, outbound: OutboundSession, brief: Brief, player_name: str) -> "PinnedClient | DoorClient":
    if brief.uses_tools:
        from rollout.door import DoorClient

        return DoorClient(url, outbound, client_name=player_name, message_timeout_s=MESSAGE_TIMEOUT_S)
    return PinnedClient(url, outbound, connect_timeout_s=CONNECT_TIMEOUT_S, message_timeout_s=MESSAGE_TIMEOUT_S)


async def play_episode(
    url: str,
    outbound: OutboundSession,
    policy: Policy,
    brief: Brief,
    spec: EpisodeSpec,
    limits: Limits,
    *,
    keep: Keep,
    player_name: str = "envhub",
) -> EpisodeResult:
    """Play one episode to its end, each record handed to `keep` as it is made; what went wrong is the result's
    error, never an exception. `player_name` is the MCP client's name an agent session through the door is recorded
    under."""
    result = EpisodeResult(spec)
    client = _client(url, outbound, brief, player_name)
    played = _Episode(_Env(client), policy.player(brief, spec.seed), limits, result, keep)
    started = time.perf_counter()
    try:
        async with asyncio.timeout(limits.episode_s):
            await played.play(spec)
    except TimeoutError:
        result.error, result.cut = f"the episode passed its wall-clock limit of {limits.episode_s:g} s", True
        result.code = "episode_s"
    except (_End, ModelError) as exc:
        result.error, result.code, result.cut = str(exc), exc.code, isinstance(exc, _Cut)
    finally:
        result.wall_s = time.perf_counter() - started
        with contextlib.suppress(Exception):  # a broken socket's close must not hide the episode's result
            async with asyncio.timeout(5):  # in this task: an MCP session's task group is left where it was entered
                await client.close()
    return result
