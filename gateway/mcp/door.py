"""The standard MCP door at /endpoints/{id}/mcp (spec 2025-06-18 and 2025-11-25), over OpenEnv servers.

POST carries one JSON-RPC message (read and written by transport.py). `initialize` negotiates the protocol version,
opens the session's environment session on a replica (environment_session.py) and answers with an `Mcp-Session-Id`;
every later request carries that id (missing: 400 with a JSON-RPC error saying to initialize; unknown or ended: 404)
and may carry `MCP-Protocol-Version` (an unsupported one: 400). A method the door does not know (server/discover, a
2026-07-28 draft client's first request) is "method not found" (-32601), session or not. Notifications and responses
get 202. A request is answered with JSON, or with an SSE stream when the client ranks `text/event-stream` above
`application/json`. GET answers 405 (the door has nothing to stream), DELETE ends the session. An initialize
carrying a run credential (X-Envhub-Run) binds the session to its agent run, which ends it when it ends. Who may use
the endpoint (its bearer, the page's Origin) and how large a body may be are the gateway's to check before it hands
the request over.
"""

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.streamable_http import (
    CONTENT_TYPE_JSON,
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
    JSONRPCRequest,
    ListToolsResult,
    ServerCapabilities,
    ToolsCapability,
)
from pydantic import ValidationError

from gateway.jsonbody import read_json
from gateway.mcp.environment_session import PROBE, Closed, EnvironmentSession
from gateway.mcp.interfaces import Interface, Interfaces
from gateway.mcp.placing import Unavailable, open_socket
from gateway.mcp.recorder import Card, Recorder, SessionRecord
from gateway.mcp.reset_arguments import reset_arguments
from gateway.mcp.results import text_of
from gateway.mcp.tools import Surface, action_surface, tools_surface
from gateway.mcp.transport import (
    SSE_HEADERS,
    HttpReply,
    HttpRequest,
    json_reply,
    jsonrpc_message,
    rpc_error,
    rpc_result,
    sse_once,
    sse_streamed,
    wants_sse,
)
from gateway.placement import Placement
from gateway.runs import RUN_HEADER, client_session, run_of
from gateway.slots import PoolFull
from protocol.frames import RPC_SERVER_ERROR
from protocol.tools import OPENING_META, parse_tools

__all__ = ["Door"]

log = logging.getLogger("envhub.mcp")

_SESSION_METHODS = ("ping", "tools/list", "tools/call")  # what a session answers; any other method is not found
_OPENING_MAX = 8192  # characters of the first observation the instructions quote


def _not_offered(request_id: Any, method: str) -> dict[str, Any]:
    offered = "an environment through envhub offers tools (tools/list, tools/call) and ping, after initialize"
    return rpc_error(request_id, METHOD_NOT_FOUND, f"{method} is not offered here: {offered}")


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
            return json_reply(
                405,
                rpc_error(
                    None, INVALID_REQUEST, "this server sends nothing unasked: POST requests, and read each answer"
                ),
                {"allow": "POST, DELETE"},
            )
        if request.method == "DELETE":
            if not session_id:
                why = f"DELETE ends a session: send its {MCP_SESSION_ID_HEADER}"
                return json_reply(400, rpc_error(None, INVALID_REQUEST, why))
            if session is None:
                return self._unknown(session_id, None)
            await self.close(session, "the client ended it (DELETE)", "client_ended")
            return HttpReply(204)
        if request.method != "POST":
            return json_reply(
                405, rpc_error(None, INVALID_REQUEST, "use POST, GET or DELETE"), {"allow": "POST, GET, DELETE"}
            )
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != CONTENT_TYPE_JSON:
            why = "send the JSON-RPC message as Content-Type: application/json"
            return json_reply(415, rpc_error(None, INVALID_REQUEST, why))
        try:
            raw = read_json(request.body)
        except ValueError as exc:
            return json_reply(400, rpc_error(None, PARSE_ERROR, f"the body is not JSON: {exc}"))
        if isinstance(raw, list):
            return json_reply(
                400, rpc_error(None, INVALID_REQUEST, "send one JSON-RPC message per request, not a batch")
            )
        try:
            message = jsonrpc_message(raw)
        except ValidationError:
            request_id = raw.get("id") if isinstance(raw, dict) else None
            return json_reply(400, rpc_error(request_id, INVALID_REQUEST, "the body is not a JSON-RPC 2.0 message"))
        sse = wants_sse(headers.get("accept", ""))
        if isinstance(message, JSONRPCRequest) and message.method == "initialize":
            gone: asyncio.Future[None] = asyncio.ensure_future(client_left())
            try:
                answer, opened = await self._initialize(message, request, placement, gone)
            finally:
                gone.cancel()
            extra = {MCP_SESSION_ID_HEADER: opened.id} if opened is not None else {}
            if sse:
                return HttpReply(200, SSE_HEADERS | extra, sse_once(answer))
            return json_reply(200, answer, extra)
        request_id = message.id if isinstance(message, JSONRPCRequest) else None
        if not session_id:
            # An error answers a request as any answer does: 200 and one JSON object (Streamable HTTP 2025-11-25,
            # "Sending Messages"). Not the draft's 404 for an unknown method: its dual-era clients take that for a
            # server of the draft's era, not one to initialize. The door acts on no notification (202, no answer).
            if not isinstance(message, JSONRPCRequest):
                return HttpReply(202)
            if message.method not in _SESSION_METHODS:
                return json_reply(200, _not_offered(request_id, message.method))
            return json_reply(
                400,
                rpc_error(
                    request_id,
                    INVALID_REQUEST,
                    f"no MCP session: send initialize first, then send the {MCP_SESSION_ID_HEADER} header it answers "
                    "with on every request",
                    {"code": "session_required"},
                ),
            )
        if session is None:
            return self._unknown(session_id, request_id)
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version is not None and version not in SUPPORTED_PROTOCOL_VERSIONS:
            return json_reply(
                400,
                rpc_error(
                    request_id,
                    INVALID_REQUEST,
                    f"unsupported {MCP_PROTOCOL_VERSION_HEADER} {version!r}; this server speaks "
                    + ", ".join(SUPPORTED_PROTOCOL_VERSIONS),
                    {"code": "protocol_version_unsupported", "supported": list(SUPPORTED_PROTOCOL_VERSIONS)},
                ),
            )
        if not isinstance(message, JSONRPCRequest):
            return HttpReply(202)  # a notification (initialized, cancelled) or a response: nothing to answer
        if sse:
            return HttpReply(
                200, dict(SSE_HEADERS), sse_streamed(asyncio.ensure_future(self._dispatch(session, message)))
            )
        return json_reply(200, await self._dispatch(session, message))

    def _unknown(self, session_id: str, request_id: Any) -> HttpReply:
        return json_reply(
            404,
            rpc_error(
                request_id,
                INVALID_REQUEST,
                f"MCP session {session_id[:12]}… is unknown here or has ended (closed, idle too long, or its "
                "replica was lost); initialize a new one",
                {"code": "session_unknown"},
            ),
        )

    # -- the session's methods

    async def _dispatch(self, session: EnvironmentSession, message: JSONRPCRequest) -> dict[str, Any]:
        request_id, params = message.id, message.params or {}
        if message.method == "ping":
            return {"jsonrpc": "2.0", "id": request_id, "result": {}}
        if message.method == "tools/list":
            return rpc_result(request_id, ListToolsResult(tools=list(session.surface.tools)))
        if message.method != "tools/call":
            return _not_offered(request_id, message.method)
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or name not in session.surface.names:
            listed = ", ".join(sorted(session.surface.names)) or "none"
            return rpc_error(request_id, INVALID_PARAMS, f"no tool {name!r} here; the tools are {listed}")
        if not isinstance(arguments, dict):
            return rpc_error(request_id, INVALID_PARAMS, f"the arguments of {name} are an object")
        try:
            result = await session.call(name, arguments)
        except Closed as exc:
            await self.close(session, str(exc), "session_ended")
            ended = f"the session ended: {exc}; initialize a new one"
            return rpc_error(request_id, RPC_SERVER_ERROR, ended, {"code": "session_ended"})
        except Exception as exc:
            log.exception("tool call %s on endpoint %s failed", name, session.endpoint_id)
            return rpc_error(request_id, INTERNAL_ERROR, f"envhub failed while calling {name}: {type(exc).__name__}")
        return rpc_result(request_id, result)

    async def _initialize(
        self, message: JSONRPCRequest, request: HttpRequest, placement: Placement, gone: "asyncio.Future[None]"
    ) -> tuple[dict[str, Any], EnvironmentSession | None]:
        request_id = message.id
        try:
            params = InitializeRequestParams.model_validate(message.params or {})
        except ValidationError:
            why = "initialize takes protocolVersion, capabilities and clientInfo"
            return rpc_error(request_id, INVALID_PARAMS, why), None
        asked = params.protocolVersion
        version = asked if asked in SUPPORTED_PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION
        arguments, problem = reset_arguments(request.query)
        if problem is not None:
            return rpc_error(request_id, INVALID_PARAMS, problem.message, problem.data), None
        try:
            run = run_of(request.headers.get(RUN_HEADER, ""))  # the run id only: the credential is kept nowhere
            joined = (run, client_session(request.headers))
            session, opening = await self.open(
                placement, gone, params.clientInfo, version, request.user, arguments, joined
            )
        except PoolFull as full:
            data = {"active_sessions": full.sessions, "max_sessions": full.capacity} | full.facts
            return rpc_error(request_id, RPC_SERVER_ERROR, full.message, data), None
        except Unavailable as exc:
            return rpc_error(request_id, RPC_SERVER_ERROR, str(exc)), None
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
        return rpc_result(request_id, result), session

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
            await self.close(session, str(exc), "session_ended")
            raise Unavailable(f"the environment's session ended as it began: {exc}") from exc
        if opening is not None and opening.isError:
            why = text_of(opening)
            await self.close(session, why, "reset_failed")
            raise Unavailable(f"the session's first reset failed: {why}")
        return session, opening

    async def close(self, session: EnvironmentSession, reason: str, code: str) -> None:
        self.sessions.pop(session.id, None)
        await session.close(reason, code)

    async def end_run(self, run_id: str) -> int:
        """The agent run ended: every session playing for it ends (its slot back at once, its episodes kept); how
        many did."""
        bound = [s for s in self.sessions.values() if s.record.run == run_id and s.ended is None]
        await asyncio.gather(*(self.close(s, f"its agent run {run_id} ended", "run_ended") for s in bound))
        return len(bound)

    async def reap(self, idle_s: float) -> None:
        """Close the sessions nobody has called for idle_s (none with a call under way): their slots free."""
        now = time.monotonic()
        for ended in [s for s in self.sessions.values() if s.ended is not None]:
            self.sessions.pop(ended.id, None)
        stale = [s for s in self.sessions.values() if not s.busy and now - s.last_used > idle_s]
        for session in stale:
            await self.close(session, f"nobody called it for {idle_s:g} s", "idle")

    async def aclose(self) -> None:
        """envhub stops: every session ends, and is recorded as ended."""
        await asyncio.gather(
            *(self.close(s, "envhub stopped", "shutting_down") for s in list(self.sessions.values())),
            return_exceptions=True,
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
