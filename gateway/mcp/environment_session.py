"""An MCP session of the door: one environment session on one replica, held by the door over the replica's `/ws`.

Why a WebSocket for every environment, MCP or not: the same socket carries an MCP environment's tool calls (as
steps, so that their rewards and done come back) and a schema-action environment's reset, step and state; the
server's capacity refusal arrives on it as on any `/ws` session, so a refused session moves to another replica
unseen; and each call is one frame on an open socket rather than an HTTP request. A slot is taken from the pool
when the session opens (waiting in its queue as a `/ws` session does, gateway.placement) and given back when it
closes: by DELETE, after `idle_s` without a call, when the replica is lost, when its agent run ends, or when envhub
stops. A session whose episode is done, or that nobody calls for a shorter while (`free_idle_slots`), gives its slot
back and keeps its id: its next call takes a slot again, and says so (`episode_lost`) when an episode was under way,
so that a client gone quiet (agent harnesses never end their sessions) holds no environment.
"""

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp.types import CallToolResult, TextContent

from gateway.mcp.episodes import EpisodeLog
from gateway.mcp.placing import Unavailable, open_socket
from gateway.mcp.recorder import Recorder, SessionRecord
from gateway.mcp.reset_arguments import reset_options
from gateway.mcp.results import error_result, observation_result, rpc_tool_result, text_of, tool_observation_result
from gateway.mcp.tools import RESET, STATE, STEP, Surface
from gateway.mcp.upstream import Upstream, UpstreamClosed
from gateway.placement import Placement
from gateway.slots import PoolFull, Slot
from protocol.frames import STATE as STATE_FRAME
from protocol.frames import mcp_frame, reset_frame, rpc, step_frame
from protocol.observations import refusal
from protocol.tools import tool_call

__all__ = [
    "EPISODE_LOST",
    "NO_SLOT",
    "PROBE",
    "Closed",
    "EnvironmentSession",
    "free_idle_slots",
]

log = logging.getLogger("envhub.mcp")

FLUSH_S = 5.0  # an episode under way is written at most this often (and whenever it ends)
_OVER = "The episode is over: call reset to play another."
PROBE = mcp_frame(rpc("tools/list", {}, "envhub-tools"))  # a session's first frame: an MCP environment lists its tools
EPISODE_LOST = "episode_lost"  # the code of a call's answer when the session gave its slot back mid-episode
NO_SLOT = "no_slot"  # the code of a call's answer when the session, idle, gave its slot back and none is free now


@dataclass
class _Step:
    """One step call as the episode log records it: which tool, what was asked, and how long the replica took."""

    episode: EpisodeLog
    tool: str
    arguments: dict[str, Any]
    action: Any
    elapsed: float = 0.0


class Closed(Exception):
    """The session ended (its replica was lost, or it was closed) while a call was under way."""


@dataclass(eq=False)
class EnvironmentSession:
    """One MCP session: its environment session's socket, the tools it offers, and the episode under way."""

    endpoint_id: str
    placement: Placement
    seat: Slot  # the slot it holds on a replica (while seated)
    socket: Upstream
    surface: Surface
    recorder: Recorder
    record: SessionRecord
    call_timeout_s: float
    connect_s: float = 10
    ping_s: float = 20
    id: str = field(default_factory=lambda: secrets.token_urlsafe(24))  # the Mcp-Session-Id: its credential
    last_used: float = field(default_factory=time.monotonic)
    ended: str | None = None  # why it closed, once it has
    episode: EpisodeLog | None = None
    episodes: int = 0
    seated: bool = True  # it holds its slot and socket (else it gave them back, idle, and takes them at its next call)
    _opening: dict[str, Any] = field(default_factory=dict)  # its first reset's arguments, to begin again with
    _lost: str | None = None  # why the episode under way went with the slot it gave back
    _final: dict[str, Any] | None = None  # the state its done episode left, asked for as the slot went back
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _writing: "asyncio.Task[None] | None" = None
    _flushed: float = field(default_factory=time.monotonic)
    _forget: Callable[[], None] = lambda: None
    _closing: "asyncio.Future[None] | None" = None

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    def watch(self) -> None:
        """Close the session when its replica is lost (told from whichever thread found it)."""
        loop = asyncio.get_running_loop()

        def lost(reason: str) -> None:
            self._closing = asyncio.ensure_future(self.close(f"its replica was lost: {reason}", "replica_lost"))

        def tell(reason: str) -> None:
            loop.call_soon_threadsafe(lost, reason)

        self._forget = self.placement.watch_loss(self.seat, tell)

    # -- the calls

    async def call(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        self.last_used = time.monotonic()
        try:
            if not self._over(name):
                try:
                    lost = await self._seat()
                except (PoolFull, Unavailable) as exc:
                    why = exc.message if isinstance(exc, PoolFull) else str(exc)
                    text = f"this session gave its slot back (its episode done, or idle), and {why}; call again later"
                    return error_result(text, observation={"error": text, "code": NO_SLOT})
                self.placement.activate(self.seat)  # it works: its session is load that may grow the pool
                if lost is not None and not (self.surface.generated and name == RESET):
                    return error_result(lost, observation={"error": lost, "code": EPISODE_LOST})
            result = await self._called(name, arguments)
            if self.episode is not None and self.episode.done:
                await self._done()
            return result
        finally:
            self.last_used = time.monotonic()

    def _over(self, name: str) -> bool:
        """Whether the call is answered without the environment: its episode is done and the call plays on in it,
        which the answer refuses, or reads the state it left; a reset takes a slot again."""
        if self.episode is None or not self.episode.done:
            return False
        return self.surface.tool_steps or name == STEP or (name == STATE and self._final is not None)

    async def _called(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        if self.surface.generated:
            if name == RESET:
                return await self._reset(arguments)
            if name == STEP:
                return await self._step(arguments)
            assert name == STATE
            return await self._state()
        if self.surface.tool_steps:
            return await self._tool_step(name, arguments)
        return await self._tool_rpc(name, arguments)

    async def begin(self, arguments: dict[str, Any]) -> CallToolResult | None:
        """Start the session's first episode, with the reset arguments its URL gave (a seed, a task): an MCP
        environment whose tool calls are steps is reset, as an evaluation's episode is, and so is a schema-action
        environment given reset arguments; other sessions wait for the agent's own reset. The reset's answer, when
        one was sent."""
        self._opening = arguments
        if self.surface.generated and not arguments:
            return None
        if not self.surface.generated and not self.surface.tool_steps:
            self.episode, self.episodes = EpisodeLog(self.record.id, 0), 1
            return None
        return await self._reset(arguments)

    async def _reset(self, arguments: dict[str, Any]) -> CallToolResult:
        options, problem = reset_options(arguments)
        if problem is not None:
            return error_result(problem.message, observation={"error": problem.message, **problem.data})
        task: dict[str, Any] | None = None
        dataset, split, index = arguments.get("dataset"), arguments.get("split"), arguments.get("index")
        if isinstance(dataset, str):
            if not isinstance(split, str):
                return error_result(f"name the split of {dataset} whose row resets the episode (split and index)")
            try:
                row = await self.recorder.dataset_task(self.endpoint_id, dataset, split, int(index or 0))
            except ValueError as exc:
                return error_result(str(exc))
            task = {"dataset": dataset, "split": split, "index": int(index or 0), "options": row}
            options |= row
        elif isinstance(split, str):
            task = {"split": split, "index": int(index or 0)}
            options |= task
        seed = arguments.get("seed")
        self._final = None
        self._end_episode("the agent reset before the episode was done", "reset_before_done")
        episode = EpisodeLog(self.record.id, self.episodes, seed=seed if isinstance(seed, int) else None, task=task)
        answer, elapsed = await self._ask(reset_frame(options))
        if answer.get("type") != "observation":
            return error_result(f"the environment refused the reset: {_message(answer)}")
        self.episode, self.episodes = episode, self.episodes + 1
        data = answer.get("data") or {}
        observation, reward, done = data.get("observation"), data.get("reward"), bool(data.get("done"))
        called = {"tool": RESET} if self.surface.generated else {}  # else the door reset it as the session opened
        episode.add("reset", observation, reward, done, elapsed, **called, arguments=arguments, options=options)
        self._save()
        return observation_result(data, over_note=_OVER)

    async def _state(self) -> CallToolResult:
        answer = self._final if self._final is not None and not self.seated else (await self._ask(STATE_FRAME))[0]
        if answer.get("type") != "state":
            return error_result(f"the environment did not give its state: {_message(answer)}")
        state = answer.get("data")
        state = state if isinstance(state, dict) else {"value": state}
        done = self.episode.done if self.episode is not None else False
        text = json.dumps(state, ensure_ascii=False, default=str)
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structuredContent={"reward": None, "done": done, "observation": state},
        )

    async def _step(self, arguments: dict[str, Any]) -> CallToolResult:
        episode = self.episode
        if episode is None:
            return error_result("no episode is under way: call reset first")
        if episode.done:
            return error_result("the episode is over (done is true): call reset to start a new one", done=True)
        action = arguments.get("action") if self.surface.wrapped else arguments
        step = _Step(episode, STEP, arguments, action)
        data = await self._step_answer(step, {"type": "step", "data": action})  # the action itself, as /ws takes it
        if isinstance(data, CallToolResult):
            return data
        refused = refusal(data.get("observation"))
        self._record(step, data.get("observation"), data.get("reward"), bool(data.get("done")), refused)
        return observation_result(data, over_note=_OVER, is_error=refused is not None)

    async def _tool_step(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        episode = self.episode
        assert episode is not None, "a session of an MCP environment whose calls are steps opens with its reset"
        if episode.done:
            return error_result(
                "the episode is over (done is true): end this MCP session and initialize a new one to play another",
                done=True,
            )
        step = _Step(episode, name, arguments, tool_call(name, arguments))
        data = await self._step_answer(step, step_frame(step.action))
        if isinstance(data, CallToolResult):
            return data
        result = tool_observation_result(data)
        why = text_of(result) if result.isError else None
        self._record(step, data.get("observation"), data.get("reward"), bool(data.get("done")), why)
        return result

    async def _tool_rpc(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        episode = self.episode
        assert episode is not None, "a session of an MCP environment's own tools begins with its episode"
        step = _Step(episode, name, arguments, tool_call(name, arguments))
        answer, step.elapsed = await self._ask(mcp_frame(rpc("tools/call", {"name": name, "arguments": arguments})))
        reply = answer.get("data") if answer.get("type") == "mcp" else None
        result_value = reply.get("result") if isinstance(reply, dict) else None
        if not isinstance(result_value, dict):
            error = reply.get("error") if isinstance(reply, dict) else None
            message = str(error.get("message")) if isinstance(error, dict) else _message(answer)
            self._record(step, {"error": error or answer}, None, False, message)
            return error_result(message)
        result = rpc_tool_result(result_value)
        self._record(step, result_value, None, False, text_of(result) if result.isError else None)
        return result

    async def _step_answer(self, step: _Step, frame: dict[str, Any]) -> dict[str, Any] | CallToolResult:
        """The data of the replica's observation for a step frame, counted in the pool's traffic; a refused frame is
        recorded as a refused step and answered as an error."""
        answer, step.elapsed = await self._ask(frame)
        self.placement.traffic.step(step.elapsed / 1000, failed=answer.get("type") != "observation")
        if answer.get("type") == "observation":
            return answer.get("data") or {}
        message = _message(answer)
        self._record(step, {"error": answer.get("data")}, None, False, message)
        return error_result(f"the environment refused the {'action' if step.tool == STEP else 'call'}: {message}")

    def _record(self, step: _Step, observation: Any, reward: Any, done: bool, refused: str | None) -> None:
        step.episode.add(
            "step",
            observation,
            reward,
            done,
            step.elapsed,
            refused=refused,
            tool=step.tool,
            arguments=step.arguments,
            action=step.action,
        )
        self._save()

    async def _ask(self, message: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """The replica's answer to one frame, and how long it took (ms); Closed when the session is gone."""
        async with self._lock:
            if self.ended is not None:
                raise Closed(self.ended)
            started = time.perf_counter()
            try:
                async with asyncio.timeout(self.call_timeout_s):  # no task of its own, as wait_for makes
                    await self.socket.send(json.dumps(message))
                    raw = await self.socket.recv()
            except UpstreamClosed as exc:
                raise Closed(self.ended or "the environment's server closed the session") from exc
            except TimeoutError as exc:
                raise Closed(f"the environment did not answer within {self.call_timeout_s:g} s") from exc
            elapsed = (time.perf_counter() - started) * 1000
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        return (answer if isinstance(answer, dict) else {"type": "error", "data": {"message": str(raw)[:200]}}), elapsed

    # -- the slot

    async def give_back(self, idle_s: float) -> None:
        """Nobody called for idle_s: the environment session ends on its replica and the slot is free; the MCP
        session stays, and its next call takes a slot again."""
        async with self._lock:
            if self.ended is not None or not self.seated or time.monotonic() - self.last_used <= idle_s:
                return  # a call came meanwhile
            self.seated = False
            self._forget()
            under_way = self.episode is not None and not self.episode.done
            self._end_episode(f"the session gave its slot back after {idle_s:g} s without a call", "slot_given_back")
            if under_way:
                self._lost = (
                    f"the episode is lost: nobody called this session for {idle_s:g} s, so it gave its environment "
                    "slot back; "
                    + ("call reset to start a new one" if self.surface.generated else "a new one has begun, call again")
                )
            await self._let_go()

    async def _done(self) -> None:
        """The episode is done: the slot goes back at once, as after an idle while (harnesses never end their
        session). The episode stays, done, for the calls that would play on in it to be refused; a reset (or an MCP
        environment's next session) takes a slot again. Its final state is kept, for the state tool to read."""
        final = None
        if self.surface.generated:
            with contextlib.suppress(Closed):
                final, _ = await self._ask(STATE_FRAME)
        async with self._lock:
            if self.ended is not None or not self.seated:
                return
            self._final = final
            self.seated = False
            self._forget()
            await self._let_go()

    async def _seat(self) -> str | None:
        """Take a slot and socket again after giving them back (waiting in the pool's queue as any session does); why
        the episode under way was lost with them, once."""
        async with self._lock:
            if self.seated or self.ended is not None:
                return None
            nobody_leaves: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.seat, self.socket, _ = await open_socket(
                self.placement, nobody_leaves, PROBE, connect_s=self.connect_s, ping_s=self.ping_s
            )
            self.seated = True
            self.placement.traffic.session_opened()
            if self.ended is not None:  # closed while it waited for the slot
                self.seated = False
                await self._let_go()
                raise Closed(self.ended)
            self.watch()
            lost, self._lost = self._lost, None
        if not self.surface.generated:  # an MCP environment's tools need an episode under way
            await self.begin(self._opening)
        return lost

    async def _let_go(self) -> None:
        """Close the environment session's socket (its server ends the session) and free the slot."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.socket.close(), timeout=5)
        self.placement.release(self.seat)
        self.placement.traffic.session_closed()

    # -- recording

    def _save(self, *, ended: str | None = None, code: str = "", force: bool = False) -> None:
        """Write the episode as it stands: at once when it ends, else at most every FLUSH_S."""
        episode = self.episode
        if episode is None:
            return
        if not (force or ended is not None or episode.done or time.monotonic() - self._flushed >= FLUSH_S):
            return
        self._flushed = time.monotonic()
        snapshot = episode.record(ended=ended, code=code)
        previous = self._writing

        async def write() -> None:
            if previous is not None:
                with contextlib.suppress(Exception):
                    await previous
            try:
                await self.recorder.episode(snapshot)
            except Exception:
                log.exception("recording episode %s-%s failed", snapshot.session, snapshot.index)

        self._writing = asyncio.ensure_future(write())

    def _end_episode(self, why: str, code: str) -> None:
        if self.episode is not None:
            self._save(ended=None if self.episode.done else why, code=code, force=True)
            self.episode = None

    async def close(self, reason: str, code: str) -> None:
        """End the session (`code`: why, as one): its episode written, its socket closed (the server ends its
        session), its slot freed."""
        if self.ended is not None:
            return
        self.ended = reason
        self._forget()
        self._end_episode(f"the session ended before the episode was done: {reason}", code)
        if self.seated:
            self.seated = False
            await self._let_go()
        if self._writing is not None:
            with contextlib.suppress(Exception):
                await self._writing
        try:
            await self.recorder.closed(self.record.id, reason, code)
        except Exception:
            log.exception("recording the end of agent session %s failed", self.record.id)


async def free_idle_slots(sessions: list[EnvironmentSession], idle_s: float) -> None:
    """Sessions nobody has called for idle_s (none with a call under way) give their slots back."""
    now = time.monotonic()
    for session in sessions:
        if session.seated and not session.busy and now - session.last_used > idle_s:
            await session.give_back(idle_s)


def _message(answer: dict[str, Any]) -> str:
    data = answer.get("data")
    if isinstance(data, dict):
        message = str(data.get("message") or data)
        errors = data.get("errors")
        if isinstance(errors, list) and errors:
            listed = [e for e in errors[:5] if isinstance(e, dict)]
            shown = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in listed)
            message += f" ({shown})"
        return message
    return json.dumps(answer, default=str)[:300]
