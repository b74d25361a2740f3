"""envhub's one client of the openenv protocol on /ws: the playground, evaluations and the quality suite all play
through it.

It speaks the frames of protocol.frames itself rather than through openenv's client: that one opens its socket by
host name, reads a reply that is not an observation as an empty one, and importing it imports Gradio (seconds a
`python -m app check` never pays). The socket goes to the address the outbound session's guard checked (so a DNS
answer that changes later reaches nothing new), with the URL's own Host header and TLS name. Every reply is bounded
by the message timeout; one that does not come in time loses the session, as its next reply would be out of step.

An episode lives on the socket that carried its reset. A step or state query after that socket is gone fails with
Lost, saying so, and only a reset opens anew: a step never goes to a new session (on another replica, say) as if
nothing happened. An error frame raises Refused, kept whole in `last_error` (its field errors explain a refusal
better than its message); a capacity refusal is AtCapacity, the server being full rather than the message wrong.
"""

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.protocol import State

from core.outbound import OutboundSession
from protocol import frames

__all__ = ["AtCapacity", "Lost", "PinnedClient", "Refused", "Result", "SessionError"]

MAX_MESSAGE_BYTES = 100 * 1024 * 1024  # a reply's bound unless the caller sets its own (openenv's client's)
PING_INTERVAL_S = 20.0  # keeps an idle session (a person thinking over a move) open through proxies
CLOSE_TIMEOUT_S = 2.0
EXCERPT_CHARS = 160


class SessionError(Exception):
    """The session could not go on: what happened, in a sentence."""


class Lost(SessionError, ConnectionError):
    """The server closed the session, stopped answering, or could not be reached."""


class Refused(SessionError, RuntimeError):
    """The server answered with an error frame: its data (code, message, field errors)."""

    def __init__(self, data: dict[str, Any], what: str) -> None:
        self.data = data
        super().__init__(f"the server refused {what}: {data.get('code') or 'ERROR'}: {_excerpt(data.get('message'))}")


class AtCapacity(Refused):
    """The server refused the session: it holds all it can (CAPACITY_REACHED)."""


@dataclass(frozen=True)
class Result:
    """What a reset or a step answered."""

    observation: Any
    reward: Any
    done: bool
    metadata: dict[str, Any] | None = None


def _excerpt(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


def _closed(ws: ClientConnection | None) -> str:
    if ws is None or ws.close_code is None:
        return ""
    return f" ({ws.close_code} {ws.close_reason})".replace(" )", ")")


class PinnedClient:
    """One WebSocket session on `{base_url}/ws`, opened through the outbound session at the first message."""

    def __init__(
        self,
        base_url: str,
        outbound: OutboundSession,
        *,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float = 60.0,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        on_answered: Callable[[], None] | None = None,
    ) -> None:
        self.url = "ws" + base_url.rstrip("/").removeprefix("http") + "/ws"
        self.outbound = outbound
        self.connect_timeout_s = connect_timeout_s
        self.message_timeout_s = message_timeout_s  # may change between messages: a probe waits less
        self.max_message_bytes = max_message_bytes
        self.last_error: dict[str, Any] | None = None
        self._on_answered = on_answered  # told once, at the first reply that is not a capacity refusal
        self._ws: ClientConnection | None = None
        self._episode_ws: ClientConnection | None = None  # the socket that carried the episode's reset

    async def reset(self, **options: Any) -> Result:
        """Reset with these options (seed, episode_id, the environment's own)."""
        return self._result(await self._exchange(frames.reset_frame(options), "the reset"), "the reset")

    async def step(self, action: dict[str, Any]) -> Result:
        return self._result(await self._exchange(frames.step_frame(action), "a step"), "a step")

    async def state(self) -> dict[str, Any]:
        reply = await self._exchange(frames.STATE, "the state query")
        data = reply.get("data")
        if reply.get("type") != "state" or not isinstance(data, dict):
            raise SessionError(f"the state query got {_excerpt(reply)}, not a state frame")
        return data

    async def close(self) -> None:
        ws, self._ws, self._episode_ws = self._ws, None, None
        if ws is not None:
            await _close(ws)

    async def _socket(self, opens_episode: bool) -> ClientConnection:
        ws, episode = self._ws, self._episode_ws
        if not opens_episode and episode is not None and (ws is not episode or episode.state is not State.OPEN):
            lost = f"the environment's session was lost{_closed(episode)}"
            raise Lost(f"{lost}: its episode is over, reset to start a new one")
        if ws is not None and ws.state is State.OPEN:
            return ws
        try:
            self._ws = await self.outbound.websocket(
                self.url,
                open_timeout_s=self.connect_timeout_s,
                max_size=self.max_message_bytes,
                ping_interval=PING_INTERVAL_S,
                ping_timeout=PING_INTERVAL_S,
                compression="deflate",
            )
        except InvalidStatus as exc:
            raise Lost(f"opening {self.url} was answered with HTTP {exc.response.status_code}") from exc
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            raise Lost(f"opening {self.url} failed: {type(exc).__name__}: {exc}".rstrip(": ")) from exc
        return self._ws

    async def _exchange(self, frame: dict[str, Any], what: str) -> dict[str, Any]:
        resets = frame["type"] == "reset"
        ws = await self._socket(opens_episode=resets)
        self.last_error = None
        # A refused session sends its error frame, then closes: the frame may still be there to read.
        with contextlib.suppress(ConnectionClosed):
            await ws.send(json.dumps(frame))
        try:
            async with asyncio.timeout(self.message_timeout_s):
                raw = await ws.recv()
        except ConnectionClosed as exc:
            said = exc.rcvd and f" (code {exc.rcvd.code}{f' {exc.rcvd.reason!r}' if exc.rcvd.reason else ''})"
            raise Lost(f"the server closed the session{said or ''} instead of answering {what}") from exc
        except (TimeoutError, asyncio.CancelledError) as exc:
            # A late reply would answer the next message: the session is over, dropped at once (not closed politely,
            # which could wait on the server that is not answering).
            self._ws = None
            ws.transport.abort()
            if isinstance(exc, TimeoutError):
                raise Lost(f"the server sent no reply to {what} within {self.message_timeout_s:g} s") from exc
            raise
        try:
            reply = json.loads(raw)
        except ValueError as exc:
            raise SessionError(f"the reply to {what} is not JSON: {_excerpt(raw)}") from exc
        if not isinstance(reply, dict):
            raise SessionError(f"the reply to {what} is not a JSON object: {_excerpt(raw)}")
        if (capacity := frames.capacity(reply)) is not None:
            self.last_error = capacity
            raise AtCapacity(capacity, what)
        answered, self._on_answered = self._on_answered, None
        if answered is not None:
            answered()
        if reply.get("type") == "error":
            data = reply.get("data")
            self.last_error = data if isinstance(data, dict) else {"message": str(data)}
            raise Refused(self.last_error, what)
        if resets:
            self._episode_ws = ws
        return reply

    @staticmethod
    def _result(reply: dict[str, Any], what: str) -> Result:
        data = reply.get("data")
        if reply.get("type") != "observation" or not isinstance(data, dict):
            raise SessionError(f"{what} got {_excerpt(reply)}, not an observation frame")
        metadata = data.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else None
        return Result(data.get("observation"), data.get("reward"), data.get("done") is True, metadata)


async def _close(ws: ClientConnection) -> None:
    """Say the session is over, then close the socket; a broken one must not hold the caller up."""
    with contextlib.suppress(TimeoutError, ConnectionClosed, OSError):
        async with asyncio.timeout(CLOSE_TIMEOUT_S):
            await ws.send(json.dumps(frames.CLOSE))
            await ws.close()
