"""The gateway: /endpoints/{id}/... proxies HTTP and WebSocket traffic to a running endpoint's replicas.

It is the one URL a trainer is given. Each new WebSocket session (and each MCP session
made over HTTP) goes to the replica with the most free slots (hosting.pools); a replica
that refuses it at capacity before answering anything is left for another, unseen by the
client, and when every slot is taken the session waits for one. Sessions pinned to a
replica (MCP session ids) reach it again; stateless HTTP is spread over the ready ones.
Frames stream through unbuffered, close codes and reasons pass through, and a session
whose replica dies or hangs is closed with 1011 and a reason saying it was lost. A dead
endpoint answers at once: 502 JSON over HTTP, close code 1011 with a reason over WebSocket.
"""

import asyncio
import json
import time
from collections.abc import Callable, MutableMapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import httpx
import websockets
from fastapi import APIRouter, Request, WebSocket
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask
from starlette.websockets import WebSocketDisconnect
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from app.api.deps import ServicesDep
from app.services import Services
from core.errors import BadRequestError, NotFoundError, UpstreamError
from hosting.endpoints import EndpointManager
from hosting.pools import Pool, PoolFull, Slot, Upstream
from hosting.routing import gateway_location, gateway_path, inner_path
from hosting.traffic import Traffic
from protocol.frames import capacity, capacity_frame, is_error_text, is_step_text, rpc_capacity, rpc_capacity_error

router = APIRouter(tags=["gateway"])

_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
# Hop-by-hop headers (RFC 9110 §7.6.1) and ones the proxy sets itself.
_DROPPED = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length",
}  # fmt: skip
# Credentials meant for envhub never travel on to an environment's server.
_PRIVATE = {"authorization", "cookie", "x-csrf-token"}
_MAX_FRAME = 100 * 1024 * 1024
_SENDABLE = {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, *range(3000, 5000)}
_BUFFERED = 8 * 1024 * 1024  # request bodies up to this are read first, so that a request can be sent again
# What a server that closed a kept-alive connection (uvicorn does after a 500 it raised) gives the request sent on it.
_STALE = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.ConnectError)
# With sign-in on, an environment's pages must not run as envhub's origin: their scripts could read
# /api/me's CSRF token and act as whoever opened them. A sandbox without allow-same-origin gives them
# an origin of their own; they can still run scripts and forms.
_SANDBOX = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"


def _not_found(endpoint_id: str) -> NotFoundError:
    return NotFoundError(f"no endpoint {endpoint_id!r}; list them with GET /api/endpoints")


def _down(manager: EndpointManager, endpoint_id: str) -> str | None:
    """Why an endpoint cannot be reached, or None when it is unknown."""
    try:
        endpoint = manager.get(endpoint_id)
    except NotFoundError:
        return None
    return f"endpoint {endpoint_id} is {endpoint.status.value}: {endpoint.message}"


def _upstream_headers(request: Request, upstream: Upstream, prefix: str) -> dict[str, str]:
    """The client's headers less envhub's own, plus the gateway prefix.

    A server whose root_path is the prefix also learns the host and scheme the client used, and so
    builds absolute URLs (gradio's, on the /web page) that come back through the gateway. Another
    server keeps building them from its own address, which is all it can reach.
    """
    kept = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED | _PRIVATE}
    forwarded = {"x-forwarded-prefix": prefix}
    if upstream.root_path == prefix:
        forwarded |= {"x-forwarded-host": request.headers.get("host", ""), "x-forwarded-proto": request.url.scheme}
    return kept | upstream.headers | forwarded


def _ready(pool: Pool | None, manager: EndpointManager, endpoint_id: str) -> Pool:
    if pool is None:
        reason = _down(manager, endpoint_id)
        raise _not_found(endpoint_id) if reason is None else UpstreamError(reason)
    return pool


def _no_replica(endpoint_id: str) -> UpstreamError:
    return UpstreamError(f"endpoint {endpoint_id} has no ready replica now (one is starting or being replaced); retry")


async def _body(request: Request) -> bytes | None:
    """The request's body when it is small enough to hold (None: it streams, and cannot be sent twice)."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) <= _BUFFERED:
        return await request.body()
    if length is None and "transfer-encoding" not in request.headers:
        return b""
    return None


@router.api_route(gateway_path("{endpoint_id}"), methods=_METHODS, include_in_schema=False)
@router.api_route(gateway_path("{endpoint_id}") + "/{path:path}", methods=_METHODS, include_in_schema=False)
async def proxy_http(request: Request, services: ServicesDep, endpoint_id: str, path: str = "") -> Response:
    manager = services.endpoints
    inside = inner_path(path)
    if inside is None:
        raise BadRequestError(f"{path!r} leaves endpoint {endpoint_id}; ask for a path inside it")
    path = inside
    pool = _ready(manager.routes.resolve(endpoint_id), manager, endpoint_id)
    traffic = manager.traffic.of(endpoint_id)
    body = await _body(request)
    if path == "mcp" and request.method == "POST" and body is not None:
        return await _proxy_mcp(request, services, pool, body, traffic)
    slot = pool.any_ready()
    if slot is None:
        raise _no_replica(endpoint_id)
    response = await _send(request, services, pool, slot, path, body, traffic)
    return _passed_on(response, services, slot, endpoint_id, path, traffic)


def _loss(pool: Pool, slot: Slot) -> tuple["asyncio.Future[str]", Callable[[], None]]:
    """A future settled (with the reason) if the slot's replica is lost, and what stops watching for that."""
    loop = asyncio.get_running_loop()
    lost: asyncio.Future[str] = loop.create_future()

    def settle(reason: str) -> None:
        if not lost.done():
            lost.set_result(reason)

    def tell(reason: str) -> None:  # from whichever thread found the loss
        loop.call_soon_threadsafe(settle, reason)

    return lost, pool.watch_loss(slot, tell)


async def _send(
    request: Request, services: Services, pool: Pool, slot: Slot, path: str, body: bytes | None, traffic: Traffic
) -> httpx.Response:
    """The request's answer from a replica, unless the replica is lost first (it hung: no waiting out the timeout)."""
    lost, forget = _loss(pool, slot)
    sending: asyncio.Future[httpx.Response] = asyncio.ensure_future(
        _exchange(request, services, slot, path, body, traffic)
    )
    waited: list[asyncio.Future[Any]] = [sending, lost]
    try:
        await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
    finally:
        forget()
    if sending.done():
        lost.cancel()
        return sending.result()
    sending.cancel()
    traffic.request(failed=True)
    raise UpstreamError(lost.result())


async def _exchange(
    request: Request, services: Services, slot: Slot, path: str, body: bytes | None, traffic: Traffic
) -> httpx.Response:
    """The request sent to a replica; once more on a fresh connection when a kept-alive one turns out closed."""
    client = services.http
    assert client is not None, "envhub's HTTP client is made when it starts serving"
    endpoint_id = request.path_params["endpoint_id"]
    url = f"{slot.upstream.url}/{path}"
    if request.url.query:
        url += f"?{request.url.query}"
    headers = _upstream_headers(request, slot.upstream, gateway_path(endpoint_id))

    def outbound(via: httpx.AsyncClient) -> httpx.Request:
        return via.build_request(
            request.method, url, headers=headers, content=request.stream() if body is None else body
        )

    try:
        try:
            return await client.send(outbound(client), stream=True)
        except _STALE:
            if body is None:
                raise
        async with httpx.AsyncClient(timeout=client.timeout, limits=httpx.Limits(max_keepalive_connections=0)) as fresh:
            response = await fresh.send(outbound(fresh))  # read whole: this client closes with the block
        return response
    except httpx.HTTPError as exc:
        traffic.request(failed=True)
        services.keeper.check_soon(endpoint_id)
        raise UpstreamError(
            f"endpoint {endpoint_id} is not answering ({type(exc).__name__}); it may have stopped"
        ) from exc


def _passed_on(
    response: httpx.Response, services: Services, slot: Slot, endpoint_id: str, path: str, traffic: Traffic
) -> Response:
    headers = {k: v for k, v in response.headers.items() if k.lower() not in _DROPPED | {"set-cookie"}}
    location = headers.get("location")
    if location is not None:
        # Keep redirects (such as /web -> /web/) inside the gateway; one to another site is not passed on.
        kept = gateway_location(location, slot.upstream.url, endpoint_id, path)
        if kept is None:
            traffic.request(failed=True)
            raise UpstreamError(
                f"endpoint {endpoint_id} redirected outside itself (to {location[:200]!r}); envhub does not follow"
            )
        headers["location"] = kept
    traffic.request(failed=response.status_code >= 500)
    if services.settings.auth_mode != "off":
        headers["content-security-policy"] = _SANDBOX
        # The sandboxed page's own requests now come from an opaque origin; nothing of envhub's rides on them.
        headers.setdefault("access-control-allow-origin", "*")
    if response.is_stream_consumed:
        return Response(response.content, status_code=response.status_code, headers=headers)
    return StreamingResponse(
        response.aiter_raw(),
        status_code=response.status_code,
        headers=headers,
        background=BackgroundTask(response.aclose),
    )


async def _proxy_mcp(request: Request, services: Services, pool: Pool, body: bytes, traffic: Traffic) -> Response:
    """POST /mcp: a session made here is pinned to the replica that made it, and its calls go there."""
    endpoint_id = pool.endpoint_id
    try:
        call = json.loads(body)
    except ValueError:
        call = None
    method = call.get("method") if isinstance(call, dict) else None
    params = call.get("params") if isinstance(call, dict) else None
    session_id = params.get("session_id") if isinstance(params, dict) else None
    if method == "openenv/session/create":
        return await _create_mcp_session(request, services, pool, body, call, traffic)
    slot = (pool.pinned_slot(session_id) if isinstance(session_id, str) else None) or pool.any_ready()
    if slot is None:
        raise _no_replica(endpoint_id)
    response = await _send(request, services, pool, slot, "mcp", body, traffic)
    if method == "openenv/session/close" and isinstance(session_id, str):
        await response.aread()
        result = _json(response.content).get("result")
        if isinstance(result, dict) and result.get("closed") is True:
            pool.unpin(session_id)
    return _passed_on(response, services, slot, endpoint_id, "mcp", traffic)


async def _create_mcp_session(
    request: Request, services: Services, pool: Pool, body: bytes, call: dict[str, Any], traffic: Traffic
) -> Response:
    avoid: set[str] = set()
    while True:
        try:
            slot = await pool.acquire(services.settings.pool_queue_s, frozenset(avoid))
        except PoolFull as full:
            refusal = rpc_capacity_error(call.get("id"), full.message, full.sessions, full.capacity)
            return Response(json.dumps(refusal), media_type="application/json")
        try:
            response = await _send(request, services, pool, slot, "mcp", body, traffic)
            await response.aread()
        except BaseException:
            pool.release(slot)
            raise
        answer = _json(response.content)
        refused = rpc_capacity(answer)
        if refused is not None:
            pool.refused(slot, _int(refused.get("max_sessions")))
            await _note_capacity(services, slot)
            avoid.add(slot.id)
            continue
        result = answer.get("result")
        if isinstance(result, dict) and isinstance(result.get("session_id"), str):
            pool.accepted(slot)
            pool.pin(result["session_id"], slot)
        else:
            pool.release(slot)
        return _passed_on(response, services, slot, pool.endpoint_id, "mcp", traffic)


def _json(content: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(content)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def _note_capacity(services: Services, slot: Slot) -> None:
    if slot.said:
        await asyncio.to_thread(services.endpoints.replicas.note_capacity, slot.id, slot.capacity)


# -- WebSocket sessions


Message = MutableMapping[str, Any]  # an ASGI WebSocket message


@dataclass
class _Relay:
    """One client session's frames, across the replicas it is tried on until one takes it."""

    inbox: asyncio.Queue[Message] = field(default_factory=lambda: asyncio.Queue(maxsize=64))
    held: list[str | bytes] = field(default_factory=list)  # sent before the replica's first answer: replayed
    confirmed: bool = False  # the replica answered something other than a refusal
    refused: dict[str, Any] | None = None  # the refusal's data (max_sessions ...), when it refused
    pending: list[float] = field(default_factory=list)  # when each step in flight was sent
    on_confirmed: Callable[[], None] = lambda: None


def _refusal(frame: str | bytes) -> dict[str, Any] | None:
    """The data of a capacity refusal (a CAPACITY_REACHED frame, or MCP's JSON-RPC error); else None."""
    if not isinstance(frame, str) or "max_sessions" not in frame:
        return None
    try:
        parsed = json.loads(frame)
    except ValueError:
        return None
    return capacity(parsed) or rpc_capacity(parsed)


async def _read_client(websocket: WebSocket, relay: _Relay) -> None:
    while True:
        message = await websocket.receive()
        await relay.inbox.put(message)
        if message["type"] == "websocket.disconnect":
            return


async def _client_to_upstream(upstream: ClientConnection, relay: _Relay) -> None:
    for held in relay.held:
        await upstream.send(held)
    while True:
        message = await relay.inbox.get()
        if message["type"] == "websocket.disconnect":
            relay.inbox.put_nowait(message)  # seen again if the session moves to another replica
            code = message.get("code", 1000)
            # 1005 and 1006 say no code came (the client closed without one, or vanished); they are never sent.
            await upstream.close(code=code if code in _SENDABLE else 1000, reason=message.get("reason") or "")
            return
        data: str | bytes | None = message.get("text")
        if data is None:
            data = message.get("bytes")
        if data is None:
            continue
        if not relay.confirmed:
            relay.held.append(data)
        if isinstance(data, str) and is_step_text(data):
            relay.pending.append(time.perf_counter())
        await upstream.send(data)


async def _upstream_to_client(
    websocket: WebSocket, upstream: ClientConnection, relay: _Relay, traffic: Traffic
) -> None:
    async for frame in upstream:
        if not relay.confirmed:
            refused = _refusal(frame)
            if refused is not None:
                relay.refused = refused
                return
            relay.confirmed = True
            relay.held.clear()
            relay.on_confirmed()
        if relay.pending:
            started = relay.pending.pop(0)
            failed = isinstance(frame, str) and is_error_text(frame)
            traffic.step(time.perf_counter() - started, failed=failed)
        if isinstance(frame, str):
            await websocket.send_text(frame)
        else:
            await websocket.send_bytes(frame)


def _reason(text: str) -> str:
    """A close reason within WebSocket's 123 bytes."""
    encoded = text.encode()
    return text if len(encoded) <= 123 else encoded[:120].decode(errors="ignore") + "..."


async def _connect(services: Services, slot: Slot, path: str, query: str) -> ClientConnection:
    target = "ws" + slot.upstream.url.removeprefix("http") + f"/{path}"
    if query:
        target += f"?{query}"
    ping = services.settings.ws_ping_s
    return await websockets.connect(
        target,
        max_size=_MAX_FRAME,
        open_timeout=10,
        ping_interval=ping,  # a replica that stops answering pings has hung: its session ends
        ping_timeout=ping,
        close_timeout=2,  # a replica that does not answer a close is let go of soon
        compression=None,
        proxy=None,
        additional_headers=slot.upstream.headers,
    )


@router.websocket(gateway_path("{endpoint_id}") + "/{path:path}")
async def proxy_websocket(websocket: WebSocket, services: ServicesDep, endpoint_id: str, path: str) -> None:
    manager = services.endpoints
    pool = manager.routes.resolve(endpoint_id)
    await websocket.accept()
    inside = inner_path(path)
    if inside is None:
        await websocket.close(code=1008, reason=f"the path leaves endpoint {endpoint_id}")
        return
    path = inside
    if pool is None:
        down = _down(manager, endpoint_id)
        await websocket.close(code=1011 if down else 1008, reason=_reason(down or f"no endpoint {endpoint_id!r}"))
        return
    traffic = manager.traffic.of(endpoint_id)
    relay = _Relay()
    reader = asyncio.create_task(_read_client(websocket, relay))
    try:
        await _run_session(websocket, services, pool, path, relay, traffic)
    finally:
        reader.cancel()


async def _run_session(
    websocket: WebSocket, services: Services, pool: Pool, path: str, relay: _Relay, traffic: Traffic
) -> None:
    """Place the session on a replica, moving it while replicas refuse, then relay it until either side ends."""
    endpoint_id = pool.endpoint_id
    attach = websocket.query_params.get("session_id")
    pinned = pool.pinned_slot(attach) if attach else None
    avoid: set[str] = set()
    while True:
        if pinned is not None:
            slot, holds = pinned, False  # the MCP session it attaches to holds the slot
        else:
            try:
                slot = await pool.acquire(services.settings.pool_queue_s, frozenset(avoid))
            except PoolFull as full:
                await _refuse(websocket, path, full)
                return
            holds = True
        try:
            upstream = await _connect(services, slot, path, websocket.url.query)
        except (OSError, InvalidHandshake, TimeoutError, ConnectionClosed) as exc:  # closed: not listening yet
            if holds:
                pool.release(slot)
            traffic.request(failed=True)
            services.keeper.check_soon(endpoint_id)
            if holds and slot.id not in avoid and len(avoid) + 1 < len(pool.slots):
                avoid.add(slot.id)  # another replica may answer
                continue
            status = f" (HTTP {exc.response.status_code})" if isinstance(exc, InvalidStatus) else ""
            await websocket.close(code=1011, reason=_reason(f"endpoint {endpoint_id} is not answering{status}"))
            return
        outcome = await _relay_session(websocket, services, pool, slot, upstream, relay, traffic, holds)
        if outcome != "refused":
            return
        avoid.add(slot.id)
        pinned = None


async def _relay_session(
    websocket: WebSocket,
    services: Services,
    pool: Pool,
    slot: Slot,
    upstream: ClientConnection,
    relay: _Relay,
    traffic: Traffic,
    holds: bool,
) -> str:
    """Relay frames until an end: "refused" when the replica refused the session before answering anything."""
    lost, forget = _loss(pool, slot)
    relay.refused = None
    relay.on_confirmed = (lambda: pool.accepted(slot)) if holds else (lambda: None)
    traffic.session_opened()
    pumps = [
        asyncio.create_task(_client_to_upstream(upstream, relay)),
        asyncio.create_task(_upstream_to_client(websocket, upstream, relay, traffic)),
    ]
    released = False
    try:
        waited: list[asyncio.Future[Any]] = [*pumps, lost]
        done, _ = await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        for task in pumps:
            task.cancel()
        if relay.refused is not None:
            await upstream.close()
            if holds:
                released = True
                pool.refused(slot, _int(relay.refused.get("max_sessions")))
                await _note_capacity(services, slot)
            return "refused"
        if lost.done():
            with suppress(RuntimeError, WebSocketDisconnect):  # first: a hung replica's close takes a while
                await websocket.close(code=1011, reason=_reason(lost.result()))
            return "lost"
        for finished in done:
            error = finished.exception()
            if error is not None and not isinstance(error, (ConnectionClosed, WebSocketDisconnect)):
                raise error
    finally:
        forget()
        lost.cancel()
        traffic.session_closed()
        if holds and not released:
            pool.release(slot)
        await upstream.close()
    await _close_like_upstream(websocket, upstream, pool.endpoint_id, services)
    return "ended"


async def _refuse(websocket: WebSocket, path: str, full: PoolFull) -> None:
    """Every slot stayed taken: refuse as a server at capacity does, with the pool's numbers."""
    if path == "mcp":
        frame = rpc_capacity_error(None, full.message, full.sessions, full.capacity)
    else:
        frame = capacity_frame(full.message, full.sessions, full.capacity)
    with suppress(RuntimeError, WebSocketDisconnect):
        await websocket.send_text(json.dumps(frame))
        await websocket.close(code=1000)


async def _close_like_upstream(
    websocket: WebSocket, upstream: ClientConnection, endpoint_id: str, services: Services
) -> None:
    """Pass the server's close code and reason on; an abrupt end (the replica died or stopped answering pings)
    becomes 1011 with a reason."""
    received, sent = upstream.protocol.close_rcvd, upstream.protocol.close_sent
    if received is not None and received.code not in (1005, 1006):
        code, reason = received.code, received.reason
    elif sent is not None and received is None and sent.code != 1011:
        return  # the client closed first: nothing more to say
    else:
        services.keeper.check_soon(endpoint_id)
        code, reason = 1011, f"endpoint {endpoint_id} lost this session: its replica stopped answering; start a new one"
    with suppress(RuntimeError, WebSocketDisconnect):  # the client may already have gone
        await websocket.close(code=code, reason=_reason(reason))
