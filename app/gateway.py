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
import functools
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

import httpx
from fastapi import APIRouter, Request, WebSocket
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask

from app.api.deps import ServicesDep
from app.relay import HandshakeError, Leg, Session, open_upstream
from app.services import Services
from app.wire import TEXT, frame
from core.errors import BadRequestError, NotFoundError, UpstreamError
from hosting.endpoints import EndpointManager
from hosting.pools import Pool, PoolFull, Slot, Upstream
from hosting.routing import GATEWAY_PREFIX, gateway_location, gateway_path, inner_path
from hosting.traffic import Traffic
from protocol.frames import capacity_frame, rpc_capacity, rpc_capacity_error

router = APIRouter(tags=["gateway"])

_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
# Hop-by-hop headers (RFC 9110 §7.6.1) and ones the proxy sets itself.
_DROPPED = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length",
}  # fmt: skip
# Credentials meant for envhub never travel on to an environment's server.
_PRIVATE = {"authorization", "cookie", "x-csrf-token"}
_CONNECT_S = 10  # how long a replica has to accept a WebSocket
_SESSION_PATH = re.compile(rf"^{GATEWAY_PREFIX}/(?P<id>[A-Za-z0-9_-]{{1,64}})/(?P<path>.*)$")
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


def is_session_path(path: str) -> bool:
    """Whether a WebSocket to this path is a gateway session (envhub's server relays those itself)."""
    return _SESSION_PATH.match(path) is not None


async def relay_websocket(services: Services, path: str, query: str, client: Leg) -> None:
    """Relay a gateway session (`/endpoints/<id>/<path>`) whose handshake is done; return once it has ended."""
    match = _SESSION_PATH.match(path)
    assert match is not None, "the server hands over gateway paths only"
    endpoint_id = match["id"]
    manager = services.endpoints
    inside = inner_path(match["path"])
    if inside is None:
        client.close(1008, f"the path leaves endpoint {endpoint_id}")
        return
    pool = manager.routes.resolve(endpoint_id)
    if pool is None:
        down = _down(manager, endpoint_id)
        client.close(1011 if down else 1008, down or f"no endpoint {endpoint_id!r}")
        return
    session = Session(endpoint_id, client, manager.traffic.of(endpoint_id), services.settings.ws_ping_s)
    await _run_session(services, pool, inside, query, session)


@router.websocket(gateway_path("{endpoint_id}") + "/{path:path}")
async def unrelayed_websocket(websocket: WebSocket, endpoint_id: str, path: str) -> None:
    """Reached only under another ASGI server (envhub's own relays gateway sessions before the app sees them)."""
    await websocket.accept()
    reason = f"this server cannot relay sessions to endpoint {endpoint_id}; serve envhub with `python -m app serve`"
    await websocket.close(code=1011, reason=reason[:123])


async def _run_session(services: Services, pool: Pool, path: str, query: str, session: Session) -> None:
    """Place the session on a replica, moving it while replicas refuse, then relay it until either side ends."""
    endpoint_id = pool.endpoint_id
    attach = parse_qs(query).get("session_id")
    pinned = pool.pinned_slot(attach[0]) if attach else None
    avoid: set[str] = set()
    while True:
        if pinned is not None:
            slot, holds = pinned, False  # the MCP session it attaches to holds the slot
        else:
            try:
                taken = await _acquire(pool, services.settings.pool_queue_s, avoid, session.client)
            except PoolFull as full:
                _refuse(session.client, path, full)
                return
            if taken is None:
                return  # the client left while it waited
            slot, holds = taken, True
        try:
            upstream = await open_upstream(slot.upstream.url, path, query, slot.upstream.headers, _CONNECT_S)
        except (OSError, HandshakeError, TimeoutError) as exc:  # closed: not listening yet
            if holds:
                pool.release(slot)
            session.traffic.request(failed=True)
            services.keeper.check_soon(endpoint_id)
            if holds and slot.id not in avoid and len(avoid) + 1 < len(pool.slots):
                avoid.add(slot.id)  # another replica may answer
                continue
            status = f" (HTTP {exc.status})" if isinstance(exc, HandshakeError) and exc.status else ""
            session.client.close(1011, f"endpoint {endpoint_id} is not answering{status}")
            return
        lost, forget = _loss(pool, slot)
        outcome = "ended"
        try:
            on_confirmed = functools.partial(pool.accepted, slot) if holds else (lambda: None)
            outcome = await session.run(upstream, lost, on_confirmed)
        finally:
            forget()
            lost.cancel()
            if holds and outcome != "refused":
                pool.release(slot)
        if session.replica_lost:
            services.keeper.check_soon(endpoint_id)
        if outcome != "refused":
            return
        refused = session.refused or {}
        if holds:
            pool.refused(slot, _int(refused.get("max_sessions")))
            await _note_capacity(services, slot)
        avoid.add(slot.id)
        pinned = None


async def _acquire(pool: Pool, queue_s: float, avoid: set[str], client: Leg) -> Slot | None:
    """A slot for the session, waiting for one as long as the pool lets it wait; None if the client leaves first."""
    acquiring: asyncio.Future[Any] = asyncio.ensure_future(pool.acquire(queue_s, frozenset(avoid)))
    await asyncio.wait([acquiring, client.gone], return_when=asyncio.FIRST_COMPLETED)
    if acquiring.done():
        acquired: Slot = acquiring.result()
        return acquired
    acquiring.cancel()
    try:
        slot: Slot = await acquiring
    except (asyncio.CancelledError, PoolFull):
        return None
    pool.release(slot)
    return None


def _refuse(client: Leg, path: str, full: PoolFull) -> None:
    """Every slot stayed taken: refuse as a server at capacity does, with the pool's numbers."""
    if path == "mcp":
        refusal = rpc_capacity_error(None, full.message, full.sessions, full.capacity)
    else:
        refusal = capacity_frame(full.message, full.sessions, full.capacity)
    client.write(frame(TEXT, json.dumps(refusal).encode(), masked=False))
    client.close(1000, "")
