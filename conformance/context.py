"""What the checks of one run share: the base URL, its outbound session, the deadline, the facts earlier checks
learned, the evidence of the current check, and the run's WebSockets.

A check raises `Fail`, `Skip` or `NotRun` when it does not pass. Every request and frame
goes through the run's `OutboundSession` (the guard, a per-request timeout, 1 MB per
response), and every wait is bounded by the run's total deadline.
"""

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from conformance.engine import Check, Fail, Finding, Lane, NotRun, Skip
from core.errors import RefusedURLError
from core.outbound import Fetched, OutboundSession
from protocol.tools import Tool

log = logging.getLogger(__name__)

EXCERPT = 300
QUIET_S = 0.25  # how long a freshly opened WebSocket is watched for frames nobody asked for
_READ_S = 0.05  # how often a pool's capacity is read again while a session waits for a reply

# What each server of the pool behind the URL holds, as envhub reads it now (its own endpoint, every ready server
# having said what it holds); None while it does not know. Where each holds one, the pool queues a second session
# until a server is free (or a new one starts) rather than serving it beside the first or refusing it. A fresh pool
# learns it from the first session a server refuses.
ServerCapacity = Callable[[], int | None]
T = TypeVar("T")


def one_at_a_time(server_capacity: ServerCapacity | None) -> bool:
    """Whether each server of the pool behind the URL holds one session at a time, as envhub reads it now."""
    return server_capacity is not None and server_capacity() == 1


async def unless_queued(pending: Coroutine[Any, Any, T], server_capacity: ServerCapacity | None) -> T | None:
    """What a second session's request gets; None as soon as each server of the pool behind the URL reads one session
    at a time, which means the pool queued that session (the caller lets it go, or it takes the next free slot)."""
    if server_capacity is None:
        return await pending
    waiting = asyncio.ensure_future(pending)
    while not waiting.done() and not one_at_a_time(server_capacity):
        await asyncio.wait([waiting], timeout=_READ_S)
    if waiting.done():
        return waiting.result()
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await waiting
    return None


__all__ = ["Context", "Evidence", "Fail", "NotRun", "ServerCapacity", "Skip"]


class Evidence(BaseModel):
    """One exchange: what the checker sent and an excerpt of what came back."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sent: str
    received: str


def excerpt(value: Any, limit: int = EXCERPT) -> str:
    if isinstance(value, bytes):
        text = value[:limit].decode("utf-8", errors="replace")
        cut = len(value) > limit
    else:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        cut = len(text) > limit
        text = text[:limit]
    return text + ("…" if cut else "")


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class Facts:
    """What earlier checks learned, for later ones."""

    metadata: dict[str, Any] | None = None
    schema: dict[str, Any] | None = None
    reset_observation: bool = False
    paths: set[str] | None = None
    mode: str | None = None
    tools: list[Tool] | None = None  # None: unknown; []: the server has no MCP tools
    env_name: str | None = None
    task_api: bool = False
    splits: list[dict[str, Any]] | None = None
    web_ui: bool = False
    max_sessions: int | None = None
    queued: bool = False  # the endpoint's pool queued a second session: each of its servers holds one
    capacity_frame: dict[str, Any] | None = None
    capacity_close_code: int | None = None
    ws_failure: str | None = None  # /ws stopped answering or closed on the checker: no more /ws checks
    action: dict[str, Any] | None = None
    episode: dict[str, Any] = field(default_factory=dict)
    execution_error: dict[str, Any] | None = None
    sessions_open: int = 0


class Socket:
    """A WebSocket of the run: replies parsed and recorded as evidence, every wait bounded."""

    def __init__(self, ctx: "Context", conn: ClientConnection, name: str, path: str) -> None:
        self.ctx = ctx
        self.conn = conn
        self.name = name
        self.path = path
        self.broken: str | None = None  # why later checks cannot use it

    async def send(self, frame: str | bytes | dict[str, Any]) -> None:
        payload = json.dumps(frame) if isinstance(frame, dict) else frame
        try:
            await self.conn.send(payload)
        except ConnectionClosed as exc:
            raise self._lost(f"closed before the checker could send ({_close_text(exc)})") from exc

    async def receive(self, what: str = "a reply", timeout_s: float | None = None) -> str | bytes:
        timeout = self.ctx.wait_s(timeout_s)
        try:
            async with asyncio.timeout(timeout):
                return await self.conn.recv()
        except TimeoutError as exc:
            raise self._lost(f"did not send {what} within {timeout:g} s") from exc
        except ConnectionClosed as exc:
            if 1009 in (exc.rcvd.code if exc.rcvd else None, exc.sent.code if exc.sent else None):
                raise self._lost(f"sent a frame over {self.ctx.outbound.max_bytes // 1024} KiB") from exc
            raise self._lost(f"closed the connection ({_close_text(exc)}) instead of sending {what}") from exc

    def _lost(self, reason: str) -> Fail:
        self.broken = f"the {self.name} WebSocket {reason} (check {self.ctx.current})"
        if self.path.startswith("/ws") and self.ctx.facts.ws_failure is None:
            # A route that stops answering or drops connections would fail every later check the
            # same slow way: they are reported as not run instead, and the run stays short.
            self.ctx.facts.ws_failure = f"WS {self.path.split('?')[0]} {reason} in check {self.ctx.current}"
        return Fail(f"the server {reason}")

    async def exchange(self, frame: str | bytes | dict[str, Any], what: str = "a reply") -> dict[str, Any]:
        """Send one frame and read the reply as a JSON object."""
        sent = excerpt(frame)
        await self.send(frame)
        try:
            raw = await self.receive(what)
        except Fail as exc:
            self.ctx.note(f"WS {self.name} ← {sent}", f"({exc})")
            raise
        self.ctx.note(f"WS {self.name} ← {sent}", excerpt(raw))
        return parse_frame(raw)

    async def unsolicited(self, seconds: float = QUIET_S) -> str | bytes | None:
        """A frame the server sends without being asked, within a short wait; None when it stays quiet."""
        try:
            async with asyncio.timeout(seconds):
                frame = await self.conn.recv()
        except TimeoutError:
            return None
        except ConnectionClosed as exc:
            raise self._lost(f"closed the connection at once ({_close_text(exc)})") from exc
        self.ctx.note(f"WS {self.name} (nothing sent yet)", excerpt(frame))
        return frame

    async def closed(self, timeout_s: float | None = None) -> tuple[int | None, list[str | bytes]]:
        """Wait for the server to close: its close code and any frames it sent first."""
        frames: list[str | bytes] = []
        try:
            async with asyncio.timeout(self.ctx.wait_s(timeout_s)):
                while True:
                    frames.append(await self.conn.recv())
        except ConnectionClosed as exc:
            return (exc.rcvd.code if exc.rcvd is not None else None), frames
        except TimeoutError as exc:
            raise self._lost("did not close the connection") from exc

    async def close(self) -> None:
        try:
            async with asyncio.timeout(2):
                await self.conn.close()
        except (TimeoutError, ConnectionClosed, OSError):
            pass


def _close_text(exc: ConnectionClosed) -> str:
    if exc.rcvd is None:
        return "no close frame"
    reason = f" {exc.rcvd.reason!r}" if exc.rcvd.reason else ""
    return f"code {exc.rcvd.code}{reason}"


def parse_frame(raw: str | bytes) -> dict[str, Any]:
    if isinstance(raw, bytes):
        raise Fail(f"the server sent a binary frame, not JSON text: {excerpt(raw, 80)}")
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise Fail(f"the reply is not JSON: {excerpt(raw, 120)}") from exc
    if not isinstance(value, dict):
        raise Fail(f"the reply is not a JSON object: {excerpt(raw, 120)}")
    return value


class Context(Lane):
    """One run: the base URL, its outbound session, the deadline, the facts and the evidence of the current check."""

    def __init__(
        self,
        base: str,
        outbound: OutboundSession,
        *,
        timeout_s: float,
        deadline_s: float,
        server_capacity: ServerCapacity | None = None,
    ) -> None:
        self.base = base.rstrip("/")
        self.server_capacity = server_capacity
        self.ws_base = "ws" + self.base.removeprefix("http")
        self.outbound = outbound
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + deadline_s
        self.facts = Facts()
        self.current = ""
        self.evidence: list[Evidence] = []
        self.sockets: dict[str, Socket] = {}
        self.cleanups: list[Callable[[], Awaitable[None]]] = []

    def before(self, check: Check[Any]) -> Finding | None:
        self.current = check.check_id
        self.evidence = []
        return None

    def after(self, check: Check[Any], finding: Finding) -> Finding:
        exchanges = [e.model_dump() for e in self.evidence[:12]]
        return replace(finding, measured={**finding.measured, "exchanges": exchanges}) if exchanges else finding

    def wait_s(self, timeout_s: float | None = None) -> float:
        """How long one request or reply may take: the per-request timeout, within the deadline."""
        return max(0.01, min(self.timeout_s if timeout_s is None else timeout_s, self.remaining()))

    def one_at_a_time(self) -> bool:
        return one_at_a_time(self.server_capacity)

    def note(self, sent: str, received: str) -> None:
        self.evidence.append(Evidence(sent=sent, received=received))

    # -- HTTP

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        content: str | bytes | None = None,
        headers: dict[str, str] | None = None,
        follow_redirects: bool = True,
    ) -> Fetched:
        sent = f"{method} {path}" + (f" {excerpt(json_body, 120)}" if json_body is not None else "")
        if content is not None:
            sent += f" {excerpt(content, 120)}"
        try:
            fetched = await self.outbound.fetch(
                method,
                self.base + path,
                json=json_body,
                content=content,
                headers=headers,
                timeout_s=self.wait_s(),
                follow_redirects=follow_redirects,
            )
        except TimeoutError as exc:
            self.note(sent, f"(no answer within {self.wait_s():g} s)")
            raise Fail(f"{method} {path} got no answer within {self.wait_s():g} s") from exc
        except RefusedURLError as exc:
            self.note(sent, f"(refused: {exc.message})")
            raise Fail(f"{method} {path} was refused by envhub's outbound guard: {exc.message}") from exc
        except Exception as exc:  # any transport failure: refused, reset, TLS, protocol
            self.note(sent, f"({type(exc).__name__}: {exc})")
            raise Fail(f"{method} {path} failed: {type(exc).__name__}: {exc}") from exc
        body = excerpt(fetched.body) + (" (cut at the size limit)" if fetched.cut else "")
        self.note(sent, f"HTTP {fetched.status} {body}")
        return fetched

    async def get(self, path: str, **options: Any) -> Fetched:
        return await self.request("GET", path, **options)

    async def post(self, path: str, body: Any = None, **options: Any) -> Fetched:
        return await self.request("POST", path, json_body=body, **options)

    def json(self, fetched: Fetched, what: str) -> Any:
        if fetched.cut:
            raise Fail(f"{what} is over {self.outbound.max_bytes // 1024} KiB; the checker stopped reading it")
        try:
            return json.loads(fetched.body)
        except ValueError as exc:
            raise Fail(f"{what} is not JSON: {excerpt(fetched.body, 120)}") from exc

    def expect(self, fetched: Fetched, status: int, what: str) -> Any:
        """The JSON body of a response that must have this status."""
        if fetched.status != status:
            raise Fail(f"{what} answered HTTP {fetched.status}, not {status}: {excerpt(fetched.body, 160)}")
        return self.json(fetched, what)

    # -- WebSocket

    async def websocket(self, path: str = "/ws", name: str = "A") -> Socket:
        url = self.ws_base + path
        if path.startswith("/ws") and self.facts.ws_failure:
            raise NotRun(f"not run: {self.facts.ws_failure}")
        sent = f"WS {path} (connect as {name})"
        try:
            conn = await self.outbound.websocket(url, open_timeout_s=self.wait_s())
        except InvalidStatus as exc:
            self.note(sent, f"HTTP {exc.response.status_code}")
            raise Fail(f"opening {path} was answered with HTTP {exc.response.status_code}") from exc
        except RefusedURLError as exc:
            raise Fail(f"opening {path} was refused by envhub's outbound guard: {exc.message}") from exc
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            self.note(sent, f"({type(exc).__name__}: {exc})")
            raise Fail(f"opening {path} failed: {type(exc).__name__}: {exc}") from exc
        self.note(sent, "open")
        socket = Socket(self, conn, name, path)
        self.sockets[name] = socket
        return socket

    async def reply_unless_queued(self, socket: Socket, frame: dict[str, Any], what: str) -> dict[str, Any] | None:
        """The reply to a frame sent on a second session; None as soon as each server of the pool behind the URL reads
        one session at a time, which means the pool queued it (the socket is closed then: it would take the next
        free slot)."""
        try:
            replied = await unless_queued(socket.exchange(frame, what), self.server_capacity)
        except Fail:
            await socket.close()  # it may be waiting still, and would take a slot the next sessions need
            raise
        if replied is not None:
            return replied
        self.facts.queued = True
        socket.broken = f"the endpoint's pool queued {socket.name}: each of its servers holds one session"
        self.note(f"WS {socket.name} (waiting)", "queued by the endpoint's pool: each of its servers holds one session")
        await socket.close()
        return None

    def socket(self, name: str = "A") -> Socket:
        """A socket an earlier check opened; NotRun when it is gone or stopped answering."""
        socket = self.sockets.get(name)
        if socket is None:
            raise NotRun(f"no {name} WebSocket: opening it failed in an earlier check")
        if socket.broken:
            raise NotRun(f"not run: {self.facts.ws_failure or socket.broken}")
        return socket

    async def close_all(self) -> None:
        for cleanup in reversed(self.cleanups):
            try:
                await cleanup()
            except Exception:
                log.debug("cleanup after a check failed", exc_info=True)
        for socket in self.sockets.values():
            await socket.close()
