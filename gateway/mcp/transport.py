"""The MCP Streamable HTTP transport at /endpoints/{id}/mcp (spec 2025-06-18 and 2025-11-25), over OpenEnv servers.

POST carries one JSON-RPC message. `initialize` negotiates the protocol version, opens the session's environment
session on a replica (sessions.py) and answers with an `Mcp-Session-Id`; every later request carries that id
(missing: 400 with a JSON-RPC error saying to initialize; unknown or ended: 404) and may carry
`MCP-Protocol-Version` (an unsupported one: 400). A method the door does not know (server/discover, a 2026-07-28
draft client's first request) is "method not found" (-32601), session or not. Notifications and responses get
202. A request is answered with JSON, or with an SSE stream when the client ranks `text/event-stream` above
`application/json`. GET answers 405 (the door has nothing to stream), DELETE ends the session. An initialize
carrying a run credential (X-Envhub-Run) binds the session to its agent run, which ends it when it ends. Who may use the
endpoint (its bearer, the page's Origin) and how large a body may be are the gateway's to check before it hands
the request over.
"""

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp.server.streamable_http import (
    CONTENT_TYPE_JSON,
    CONTENT_TYPE_SSE,
    MCP_PROTOCOL_VERSION_HEADER,
    MCP_SESSION_ID_HEADER,
)
from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LATEST_PROTOCOL_VERSION,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    CallToolResult,
    Implementation,
    InitializeRequestParams,
    InitializeResult,
    JSONRPCMessage,
    JSONRPCRequest,
    ListToolsResult,
    ServerCapabilities,
    ToolsCapability,
)
from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

from gateway.jsonbody import TooDeep, read_json
from gateway.mcp.interfaces import Interface, Interfaces
from gateway.mcp.ports import Card, Recorder, SessionRecord
from gateway.mcp.results import text_of
from gateway.mcp.sessions import PROBE, Closed, EnvironmentSession, Unavailable, open_socket, reset_arguments
from gateway.mcp.tools import Surface, action_surface, tools_surface
from gateway.placement import Placement
from gateway.runs import RUN_HEADER, client_session, run_of
from gateway.slots import PoolFull
from protocol.frames import RPC_SERVER_ERROR
from protocol.tools import OPENING_META, parse_tools

__all__ = ["Door", "HttpReply", "HttpRequest", "is_standard"]

log = logging.getLogger("envhub.mcp")

_KEEPALIVE_S = 15.0  # an SSE answer still being worked on sends a comment this often, so proxies keep it open
_SSE = {"content-type": CONTENT_TYPE_SSE, "cache-control": "no-cache"}
# Standard methods OpenEnv's own JSON-RPC does not know: only a standard client sends them.
_STANDARD_METHODS = ("initialize", "ping", "server/discover")
_SESSION_METHODS = ("ping", "tools/list", "tools/call")  # what a session answers; any other method is not found
_OPENING_MAX = 8192  # characters of the first observation the instructions quote


@dataclass(frozen=True)
class HttpRequest:
    method: str
    headers: Mapping[str, str]  # case-insensitive, as the gateway's server gives them
    body: bytes
    user: str | None = None  # who the bearer proved to be, if anyone
    query: Mapping[str, str] = field(default_factory=dict)  # the URL's: a session's first reset (reset_arguments)


@dataclass
class HttpReply:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | AsyncIterator[bytes] = b""


def is_standard(method: str, headers: Mapping[str, str], body: bytes) -> bool:
    """Whether a request to an endpoint's /mcp is the standard transport's (the door's) rather than OpenEnv's own
    JSON-RPC (bare tools/list and tools/call, openenv/session/*), which the gateway passes on unchanged."""
    if method != "POST":
        return method in ("GET", "DELETE")
    if MCP_SESSION_ID_HEADER in headers or MCP_PROTOCOL_VERSION_HEADER in headers:
        return True
    try:
        message = read_json(body)
    except TooDeep:
        return True  # the door refuses it: no server need read it
    except ValueError:
        return False
    called = message.get("method") if isinstance(message, dict) else None
    return isinstance(called, str) and (called in _STANDARD_METHODS or called.startswith("notifications/"))


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _not_offered(request_id: Any, method: str) -> dict[str, Any]:
    offered = "an environment through envhub offers tools (tools/list, tools/call) and ping, after initialize"
    return _error(request_id, METHOD_NOT_FOUND, f"{method} is not offered here: {offered}")


def _result(request_id: Any, result: BaseModel) -> dict[str, Any]:
    """A JSON-RPC result; the model stays one until the message is written (`_encoded`)."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _jsonrpc_message(raw: Any) -> Any:
    """The JSON-RPC message (a request, a notification, a response or an error); ValidationError if none. A request,
    which nearly every message is, is read as one at once rather than tried against each kind in turn."""
    if isinstance(raw, dict) and "method" in raw and "id" in raw:
        with contextlib.suppress(ValidationError):
            return JSONRPCRequest.model_validate(raw)
    return JSONRPCMessage.model_validate(raw).root


def _encoded(message: dict[str, Any]) -> bytes:
    """A message as JSON, its models by their aliases without their unset (None) fields, as MCP writes them;
    pydantic's serializer writes the whole message at once (five times as fast as dumping the models, then json)."""
    return to_json(message, by_alias=True, exclude_none=True)


def _json(status: int, message: dict[str, Any] | None, headers: dict[str, str] | None = None) -> HttpReply:
    body = b"" if message is None else _encoded(message)
    kind = {"content-type": CONTENT_TYPE_JSON} if message is not None else {}
    return HttpReply(status, kind | (headers or {}), body)


def _wants_sse(accept: str) -> bool:
    """SSE when the client ranks it above JSON (or takes SSE alone); JSON when it takes both alike."""
    ranks: dict[str, float] = {}
    for part in accept.split(","):
        kind, *params = (p.strip() for p in part.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                with contextlib.suppress(ValueError):
                    quality = float(value)
        ranks[kind.lower()] = max(ranks.get(kind.lower(), 0.0), quality)
    json_rank = max(ranks.get(CONTENT_TYPE_JSON, 0.0), ranks.get("application/*", 0.0), ranks.get("*/*", 0.0))
    return ranks.get(CONTENT_TYPE_SSE, 0.0) > json_rank


def _event(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + _encoded(message) + b"\n\n"


class Door:
    """The MCP door of every endpoint: its sessions, and what it remembers of each endpoint's environment."""

    def __init__(
        self, recorder: Recorder, *, ping_s: float = 20, connect_s: float = 10, call_timeout_s: float = 300
    ) -> None:
        self.recorder = recorder
        self.ping_s, self.connect_s, self.call_timeout_s = ping_s, connect_s, call_timeout_s
        self.sessions: dict[str, EnvironmentSession] = {}
        self._interfaces = Interfaces()
        self._cards: dict[str, Card] = {}

    # -- HTTP

    async def handle(
        self, request: HttpRequest, placement: Placement, client_left: Callable[[], Awaitable[None]]
    ) -> HttpReply:
        """Answer one request to the endpoint's /mcp; `client_left()` returns once the client has gone, which an
        initialize watches while it waits for a slot (and only then: the watch is a task, cancelled before the
        answer, since a streamed answer listens for the disconnect itself)."""
        headers = request.headers
        session_id = headers.get(MCP_SESSION_ID_HEADER)
        session = self.sessions.get(session_id) if session_id else None
        if session is not None and session.ended is not None:
            self.sessions.pop(session.id, None)  # it ended on its own (its replica was lost)
            session = None
        if session is not None and session.endpoint_id != placement.endpoint_id:
            session = None  # another endpoint's: unknown here
        if request.method == "GET":
            if session_id and session is None:
                return self._unknown(session_id, None)
            return _json(
                405,
                _error(None, INVALID_REQUEST, "this server sends nothing unasked: POST requests, and read each answer"),
                {"allow": "POST, DELETE"},
            )
        if request.method == "DELETE":
            if not session_id:
                why = f"DELETE ends a session: send its {MCP_SESSION_ID_HEADER}"
                return _json(400, _error(None, INVALID_REQUEST, why))
            if session is None:
                return self._unknown(session_id, None)
            await self.close(session, "the client ended it (DELETE)")
            return HttpReply(204)
        if request.method != "POST":
            return _json(405, _error(None, INVALID_REQUEST, "use POST, GET or DELETE"), {"allow": "POST, GET, DELETE"})
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != CONTENT_TYPE_JSON:
            why = "send the JSON-RPC message as Content-Type: application/json"
            return _json(415, _error(None, INVALID_REQUEST, why))
        try:
            raw = read_json(request.body)
        except ValueError as exc:
            return _json(400, _error(None, PARSE_ERROR, f"the body is not JSON: {exc}"))
        if isinstance(raw, list):
            return _json(400, _error(None, INVALID_REQUEST, "send one JSON-RPC message per request, not a batch"))
        try:
            message = _jsonrpc_message(raw)
        except ValidationError:
            request_id = raw.get("id") if isinstance(raw, dict) else None
            return _json(400, _error(request_id, INVALID_REQUEST, "the body is not a JSON-RPC 2.0 message"))
        sse = _wants_sse(headers.get("accept", ""))
        if isinstance(message, JSONRPCRequest) and message.method == "initialize":
            gone: asyncio.Future[None] = asyncio.ensure_future(client_left())
            try:
                answer, opened = await self._initialize(message, request, placement, gone)
            finally:
                gone.cancel()
            extra = {MCP_SESSION_ID_HEADER: opened.id} if opened is not None else {}
            if sse:
                return HttpReply(200, _SSE | extra, _once(answer))
            return _json(200, answer, extra)
        request_id = message.id if isinstance(message, JSONRPCRequest) else None
        if not session_id:
            # An error answers a request as any answer does: 200 and one JSON object (Streamable HTTP 2025-11-25,
            # "Sending Messages"). Not the draft's 404 for an unknown method: its dual-era clients take that for a
            # server of the draft's era, not one to initialize. The door acts on no notification (202, no answer).
            if not isinstance(message, JSONRPCRequest):
                return HttpReply(202)
            if message.method not in _SESSION_METHODS:
                return _json(200, _not_offered(request_id, message.method))
            return _json(
                400,
                _error(
                    request_id,
                    INVALID_REQUEST,
                    f"no MCP session: send initialize first, then send the {MCP_SESSION_ID_HEADER} header it answers "
                    "with on every request",
                ),
            )
        if session is None:
            return self._unknown(session_id, request_id)
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version is not None and version not in SUPPORTED_PROTOCOL_VERSIONS:
            return _json(
                400,
                _error(
                    request_id,
                    INVALID_REQUEST,
                    f"unsupported {MCP_PROTOCOL_VERSION_HEADER} {version!r}; this server speaks "
                    + ", ".join(SUPPORTED_PROTOCOL_VERSIONS),
                ),
            )
        if not isinstance(message, JSONRPCRequest):
            return HttpReply(202)  # a notification (initialized, cancelled) or a response: nothing to answer
        if sse:
            return HttpReply(200, dict(_SSE), _streamed(asyncio.ensure_future(self._dispatch(session, message))))
        return _json(200, await self._dispatch(session, message))

    def _unknown(self, session_id: str, request_id: Any) -> HttpReply:
        return _json(
            404,
            _error(
                request_id,
                INVALID_REQUEST,
                f"MCP session {session_id[:12]}… is unknown here or has ended (closed, idle too long, or its "
                "replica was lost); initialize a new one",
            ),
        )

    # -- the session's methods

    async def _dispatch(self, session: EnvironmentSession, message: JSONRPCRequest) -> dict[str, Any]:
        request_id, params = message.id, message.params or {}
        if message.method == "ping":
            return {"jsonrpc": "2.0", "id": request_id, "result": {}}
        if message.method == "tools/list":
            return _result(request_id, ListToolsResult(tools=list(session.surface.tools)))
        if message.method != "tools/call":
            return _not_offered(request_id, message.method)
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or name not in session.surface.names:
            listed = ", ".join(sorted(session.surface.names)) or "none"
            return _error(request_id, INVALID_PARAMS, f"no tool {name!r} here; the tools are {listed}")
        if not isinstance(arguments, dict):
            return _error(request_id, INVALID_PARAMS, f"the arguments of {name} are an object")
        try:
            result = await session.call(name, arguments)
        except Closed as exc:
            await self.close(session, str(exc))
            return _error(request_id, RPC_SERVER_ERROR, f"the session ended: {exc}; initialize a new one")
        except Exception as exc:
            log.exception("tool call %s on endpoint %s failed", name, session.endpoint_id)
            return _error(request_id, INTERNAL_ERROR, f"envhub failed while calling {name}: {type(exc).__name__}")
        return _result(request_id, result)

    async def _initialize(
        self, message: JSONRPCRequest, request: HttpRequest, placement: Placement, gone: "asyncio.Future[None]"
    ) -> tuple[dict[str, Any], EnvironmentSession | None]:
        request_id = message.id
        try:
            params = InitializeRequestParams.model_validate(message.params or {})
        except ValidationError:
            why = "initialize takes protocolVersion, capabilities and clientInfo"
            return _error(request_id, INVALID_PARAMS, why), None
        asked = params.protocolVersion
        version = asked if asked in SUPPORTED_PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION
        arguments, problem = reset_arguments(request.query)
        if problem is not None:
            return _error(request_id, INVALID_PARAMS, problem), None
        try:
            run = run_of(request.headers.get(RUN_HEADER, ""))  # the run id only: the credential is kept nowhere
            joined = (run, client_session(request.headers))
            session, opening = await self.open(
                placement, gone, params.clientInfo, version, request.user, arguments, joined
            )
        except PoolFull as full:
            data = {"active_sessions": full.sessions, "max_sessions": full.capacity} | (
                {"limit": full.limit} if full.limit else {}
            )
            return _error(request_id, RPC_SERVER_ERROR, full.message, data), None
        except Unavailable as exc:
            return _error(request_id, RPC_SERVER_ERROR, str(exc)), None
        card = self._cards.get(placement.endpoint_id) or Card(placement.endpoint_id)
        how = (
            "Call reset to start an episode, then step with an action until done is true."
            if session.surface.generated
            else "Its tools are the environment's own; each result carries the reward and whether it is done."
        )
        instructions = f"{card.title or card.environment}, an OpenEnv environment served by envhub. {how}"
        meta = None
        if opening is not None:  # the episode has begun: the agent reads where it starts, harnesses its figures
            shown = text_of(opening, _OPENING_MAX)
            instructions += f"\n\nThe episode has begun. Its first observation:\n{shown}"
            meta = {OPENING_META: opening.structuredContent}
        result = InitializeResult(
            protocolVersion=version,
            capabilities=ServerCapabilities(tools=ToolsCapability(listChanged=False)),
            serverInfo=Implementation(name=f"envhub: {card.environment}", version=card.revision or "local"),
            instructions=instructions,
            _meta=meta,
        )
        return _result(request_id, result), session

    # -- sessions

    async def open(
        self,
        placement: Placement,
        gone: "asyncio.Future[None]",
        client: Implementation,
        version: str,
        user: str | None,
        reset: dict[str, Any],
        joined: tuple[str | None, str | None] = (None, None),
    ) -> tuple[EnvironmentSession, CallToolResult | None]:
        """A new session: a slot and a socket on a replica, its tools, its record, and its first episode begun
        (`reset`: the arguments of its first reset; `joined`: the agent run it plays for and the harness's own
        session id); and that reset's answer, when the door sent one."""
        endpoint_id = placement.endpoint_id
        card = self._cards.get(endpoint_id)
        if card is None:
            card = self._cards[endpoint_id] = await self.recorder.card(endpoint_id)
        seat, socket, first = await open_socket(placement, gone, PROBE, connect_s=self.connect_s, ping_s=self.ping_s)
        try:
            interface = await self._interfaces.of(endpoint_id, seat.upstream.url, dict(seat.upstream.headers))
            surface = _surface(first, interface, card)
            if surface is None:
                raise Unavailable(
                    f"{card.environment} describes no action (no /schema, no MCP tools); the door has nothing to offer"
                )
        except BaseException:
            await socket.close()
            placement.release(seat)
            raise
        record = SessionRecord(
            id=_record_id(),
            endpoint=endpoint_id,
            environment=card.environment,
            revision=card.revision,
            client=f"{client.name} {client.version}".strip()[:200],
            protocol_version=version,
            user=user,
            tools=tuple(tool.name for tool in surface.tools),
            holder=placement.client,
            run=joined[0],
            client_session=joined[1],
        )
        session = EnvironmentSession(
            endpoint_id, placement, seat, socket, surface, self.recorder, record, self.call_timeout_s,
            self.connect_s, self.ping_s,
        )  # fmt: skip
        placement.traffic.session_opened()
        self.sessions[session.id] = session
        session.watch()
        try:
            await self.recorder.opened(record)
        except Exception:
            log.exception("recording agent session %s failed", record.id)
        try:
            opening = await session.begin(reset)
        except Closed as exc:
            await self.close(session, str(exc))
            raise Unavailable(f"the environment's session ended as it began: {exc}") from exc
        if opening is not None and opening.isError:
            why = text_of(opening)
            await self.close(session, why)
            raise Unavailable(f"the session's first reset failed: {why}")
        return session, opening

    async def close(self, session: EnvironmentSession, reason: str) -> None:
        self.sessions.pop(session.id, None)
        await session.close(reason)

    async def end_run(self, run_id: str) -> int:
        """The agent run ended: every session playing for it ends (its slot back at once, its episodes kept); how
        many did."""
        bound = [s for s in self.sessions.values() if s.record.run == run_id and s.ended is None]
        await asyncio.gather(*(self.close(s, f"its agent run {run_id} ended") for s in bound))
        return len(bound)

    async def reap(self, idle_s: float) -> None:
        """Close the sessions nobody has called for idle_s (none with a call under way): their slots free."""
        now = time.monotonic()
        for ended in [s for s in self.sessions.values() if s.ended is not None]:
            self.sessions.pop(ended.id, None)
        stale = [s for s in self.sessions.values() if not s.busy and now - s.last_used > idle_s]
        for session in stale:
            await self.close(session, f"nobody called it for {idle_s:g} s")

    async def aclose(self) -> None:
        """envhub stops: every session ends, and is recorded as ended."""
        await asyncio.gather(
            *(self.close(s, "envhub stopped") for s in list(self.sessions.values())), return_exceptions=True
        )
        await self._interfaces.aclose()


def _surface(first: dict[str, Any], interface: Interface, card: Card) -> Surface | None:
    """The environment's tools when it lists some (the probe's answer), else generated ones from its action schema."""
    reply = first.get("data") if first.get("type") == "mcp" else None
    result = reply.get("result") if isinstance(reply, dict) else None
    listed = result.get("tools") if isinstance(result, dict) else None
    if isinstance(listed, list) and parse_tools(listed):
        return tools_surface(listed, interface.action_schema)
    if interface.action_schema is not None:
        return action_surface(interface.action_schema, card, interface.splits)
    return None


def _record_id() -> str:
    return "as-" + secrets.token_hex(5)


async def _once(message: dict[str, Any]) -> AsyncIterator[bytes]:
    yield _event(message)


async def _streamed(work: "asyncio.Future[dict[str, Any]]") -> AsyncIterator[bytes]:
    """The answer as one SSE event, with comments while it is being worked on."""
    try:
        while True:
            done, _ = await asyncio.wait([work], timeout=_KEEPALIVE_S)
            if done:
                break
            yield b": working\n\n"
        yield _event(work.result())
    finally:
        if not work.done():
            work.cancel()
