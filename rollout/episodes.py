"""One episode of an evaluation: reset, then ask the player for a move and step until the environment
says done or a limit is reached. Invalid moves and actions the server refuses go back to the player,
a bounded number of times per step; every step is recorded with the model's reply. An environment whose
actions are tool calls is played through the endpoint's MCP door (rollout/door.py); others over its `/ws`."""

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.outbound import OutboundSession
from protocol.observations import kept, refusal, reward_number, success
from rollout.harness import Brief
from rollout.model import ModelError
from rollout.players import Move, Player, Policy

if TYPE_CHECKING:  # openenv's package imports Gradio: only a process that plays pays for it
    from protocol.client import PinnedClient
    from rollout.door import DoorClient

__all__ = ["EpisodeResult", "EpisodeSpec", "Limits", "play_episode"]

CONNECT_TIMEOUT_S = 10.0
MESSAGE_TIMEOUT_S = 60.0
MAX_STORED_OBSERVATION = 256 * 1024  # characters of one observation kept in the record


@dataclass(frozen=True)
class Limits:
    max_steps: int = 100
    max_tokens: int | None = None  # per episode
    episode_s: float = 600.0
    retries: int = 3  # invalid moves allowed per step before the episode ends


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
    steps: list[dict[str, Any]] = field(default_factory=list)
    reward: float = 0.0
    final_reward: float | None = None
    success: bool | None = None
    done: bool = False
    invalid: int = 0
    tokens: int = 0
    wall_s: float = 0.0
    error: str | None = None  # why it ended before done: a failure, or a limit when cut
    cut: bool = False  # it reached a limit (steps, tokens, time)

    @property
    def status(self) -> str:
        return "done" if self.done else ("cut" if self.cut else "failed")

    @property
    def step_count(self) -> int:
        """The steps the environment took (refused actions are not steps)."""
        return sum(1 for s in self.steps if s.get("kind") == "step" and not s.get("refused"))


class _End(Exception):
    """The episode fails here, for the reason given."""


class _Cut(_End):
    """The episode reached one of its limits."""


@dataclass
class _Episode:
    client: "PinnedClient | DoorClient"
    player: Player
    limits: Limits
    result: EpisodeResult

    def _record(self, kind: str, outcome: Any, elapsed_ms: float, **fields: Any) -> None:
        observation = outcome.observation if isinstance(outcome.observation, dict) else {"value": outcome.observation}
        reward = reward_number(outcome.reward)
        if kind == "step" and reward is not None:
            self.result.reward += reward
        self.result.final_reward = reward if kind == "step" else self.result.final_reward
        self.result.done = bool(outcome.done)
        self.result.success = success(observation)
        self.result.steps.append(
            {
                "kind": kind,
                "index": len(self.result.steps),
                **fields,
                "observation": kept(observation, MAX_STORED_OBSERVATION),
                "reward": outcome.reward,
                "done": bool(outcome.done),
                "env_ms": round(elapsed_ms, 3),
            }
        )

    async def _call(self, send: Any) -> tuple[Any, float, str | None]:
        """The server's answer and its time, or the message of the error frame it sent instead."""
        self.client.last_error = None
        started = time.perf_counter()
        try:
            outcome = await send
        except (RuntimeError, ValueError) as exc:
            if self.client.last_error is None:
                raise _End(f"the environment's connection failed: {exc}") from exc
            return None, 0.0, str(self.client.last_error.get("message") or self.client.last_error)
        except (ConnectionError, OSError) as exc:
            raise _End(f"the environment's connection failed: {exc}") from exc
        return outcome, (time.perf_counter() - started) * 1000, None

    async def play(self, spec: EpisodeSpec) -> None:
        options = spec.reset_options()
        outcome, elapsed, refused = await self._call(self.client.reset(**options))
        if refused is not None:
            raise _End(f"the environment refused the reset: {refused}")
        self._record("reset", outcome, elapsed, options=options)
        observation, reward = self.result.steps[-1]["observation"], None
        for _ in range(self.limits.max_steps):
            await self._step(await self.player.act(observation, reward))
            if self.result.done:
                return
            if self.limits.max_tokens is not None and self.result.tokens >= self.limits.max_tokens:
                raise _Cut(f"the episode used {self.result.tokens:,} tokens, its limit is {self.limits.max_tokens:,}")
            observation, reward = self.result.steps[-1]["observation"], self.result.steps[-1]["reward"]
        raise _Cut(f"the episode reached its limit of {self.limits.max_steps} steps")

    async def _step(self, move: Move) -> None:
        """Send one action, asking again while the move is invalid or the server refuses it."""
        problems: list[dict[str, Any]] = []
        replies_tokens, model_ms = 0, 0.0
        while True:
            replies_tokens += move.tokens
            model_ms += move.model_ms
            self.result.tokens += move.tokens
            problem = move.problem
            if move.action is not None:
                outcome, elapsed, problem = await self._call(self.client.step(move.action))
                if problem is None:
                    # An action the environment answers with an error is a step it refused: an invalid move,
                    # kept in the episode (it answered) but not counted among its steps.
                    refused = refusal(outcome.observation)
                    self._record(
                        "step",
                        outcome,
                        elapsed,
                        reply=move.reply,
                        action=move.action,
                        retries=len(problems),
                        problems=problems,
                        tokens=replies_tokens,
                        model_ms=round(model_ms, 3),
                        **({"refused": refused} if refused else {}),
                    )
                    if refused:
                        self.result.invalid += 1
                    return
            self.result.invalid += 1
            problems.append({"reply": move.reply, "action": move.action, "problem": problem or "no action"})
            if len(problems) > self.limits.retries:
                raise _End(f"no valid action after {len(problems)} tries; the last problem: {problem}")
            move = await self.player.retry(problem or "no action was given")


def _client(url: str, outbound: OutboundSession, brief: Brief, player_name: str) -> "PinnedClient | DoorClient":
    if brief.uses_tools:
        from rollout.door import DoorClient

        return DoorClient(url, outbound, client_name=player_name, message_timeout_s=MESSAGE_TIMEOUT_S)
    from protocol.client import PinnedClient

    return PinnedClient(url, outbound, connect_timeout_s=CONNECT_TIMEOUT_S, message_timeout_s=MESSAGE_TIMEOUT_S)


async def play_episode(
    url: str,
    outbound: OutboundSession,
    policy: Policy,
    brief: Brief,
    spec: EpisodeSpec,
    limits: Limits,
    *,
    player_name: str = "envhub",
) -> EpisodeResult:
    """Play one episode to its end; what went wrong is the result's error, never an exception. `player_name` is
    the MCP client's name an agent session through the door is recorded under."""
    result = EpisodeResult(spec)
    client = _client(url, outbound, brief, player_name)
    episode = _Episode(client, policy.player(brief, spec.seed), limits, result)
    started = time.perf_counter()
    try:
        async with asyncio.timeout(limits.episode_s):
            await episode.play(spec)
    except TimeoutError:
        result.error, result.cut = f"the episode passed its wall-clock limit of {limits.episode_s:g} s", True
    except (_End, ModelError) as exc:
        result.error, result.cut = str(exc), isinstance(exc, _Cut)
    finally:
        result.wall_s = time.perf_counter() - started
        with contextlib.suppress(Exception):  # a broken socket's close must not hide the episode's result
            async with asyncio.timeout(5):  # in this task: an MCP session's task group is left where it was entered
                await client.close()
    return result
