"""The gateway: /endpoints/{id}/... proxies HTTP and WebSocket traffic to a running endpoint's replicas.

It is the one URL a trainer is given (and an agent harness: a standard MCP request to /mcp goes to the MCP door,
gateway.mcp, through app.agents). Each new WebSocket session (and each MCP session
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
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote

import httpx
from fastapi import APIRouter, Request, WebSocket
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask

from app import agents
from app.api.deps import ServicesDep
from app.gate import Refusal, admit, client_of, origin_refusal
from app.pinned import close_on_replica
from app.relay import PATH_SAFE, HandshakeError, Leg, Session, open_upstream
from app.services import Services
from app.wire import TEXT, frame
from core.errors import BadRequestError, EnvhubError, NotFoundError, PayloadTooLargeError, UpstreamError
from gateway.mcp import is_standard
from hosting.pools import Pool, PoolFull, Slot, Upstream, Waiter
from hosting.routing import GATEWAY_PREFIX, Down, gateway_location, gateway_path, inner_path
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
_CONTROL_MAX = 1024 * 1024  # a JSON-RPC call to /mcp, and the answers to the calls the gateway reads
# What a server that closed a kept-alive connection (uvicorn does after a 500 it raised) gives the request sent on it.
_STALE = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.ConnectError)
# Sent again after such an error only when that cannot apply it twice (RFC 9110 §9.2.2): a POST (a step, an MCP call)
# may have reached the server before its connection broke, unless it never connected.
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
# With sign-in on, an environment's pages must not run as envhub's origin: their scripts could read
# /api/me's CSRF token and act as whoever opened them. A sandbox without allow-same-origin gives them
# an origin of their own; they can still run scripts and forms.
_SANDBOX = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"


def _not_found(endpoint_id: str) -> NotFoundError:
    return NotFoundError(f"no endpoint {endpoint_id!r}; list them with GET /api/endpoints")


async def _lookup(services: Services, endpoint_id: str) -> Pool | Down:
    """The endpoint's pool, or why there is none: from what the routes hold, else read off the event loop."""
    routes = services.endpoints.routes
    found = routes.cached(endpoint_id)
    if found is None:
        found = await asyncio.to_thread(routes.lookup, endpoint_id)
    return found


def _error(refusal: Refusal) -> EnvhubError:
    error = EnvhubError(refusal.message)
    error.status_code = refusal.status
    return error


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


def _ready(found: Pool | Down, endpoint_id: str) -> Pool:
    if isinstance(found, Down):
        raise _not_found(endpoint_id) if found.reason is None else UpstreamError(found.reason)
    return found


def _no_replica(endpoint_id: str) -> UpstreamError:
    return UpstreamError(f"endpoint {endpoint_id} has no ready replica now (one is starting or being replaced); retry")


class _TooLarge(Exception):
    """A request body passed the gateway's limit while it streamed."""


def _too_large(what: str, limit: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"{what} is over {limit // 1024} KiB, the most the gateway passes on; send less")


async def _body(request: Request, limit: int, *, whole: bool = False) -> bytes | AsyncIterator[bytes]:
    """The request's body: read first when small enough to hold (so that it can be sent again), else a stream.
    Either way no more than `limit` bytes are taken (413); `whole` reads it first whatever its size."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise _too_large("the request's body", limit)
    if length is None and "transfer-encoding" not in request.headers:
        return b""
    if whole or (length is not None and length.isdigit() and int(length) <= _BUFFERED):
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large("the request's body", limit)
            chunks.append(chunk)
        return b"".join(chunks)
    return _capped(request.stream(), limit)


async def _capped(stream: AsyncIterator[bytes], limit: int) -> AsyncIterator[bytes]:
    size = 0
    async for chunk in stream:
        size += len(chunk)
        if size > limit:
            raise _TooLarge()
        yield chunk


@router.api_route(gateway_path("{endpoint_id}"), methods=_METHODS, include_in_schema=False)
@router.api_route(gateway_path("{endpoint_id}") + "/{path:path}", methods=_METHODS, include_in_schema=False)
async def proxy_http(request: Request, services: ServicesDep, endpoint_id: str, path: str = "") -> Response:
    inside = inner_path(path)
    if inside is None:
        raise BadRequestError(f"{path!r} leaves endpoint {endpoint_id}; ask for a path inside it")
    path = inside
    pool = _ready(await _lookup(services, endpoint_id), endpoint_id)
    refusal, user = await admit(services, pool, request.headers)
    if refusal is not None:
        raise _error(refusal)
    traffic = services.endpoints.traffic.of(endpoint_id)
    if path == "mcp" and request.method in ("POST", "GET", "DELETE"):
        refusal = origin_refusal(services, request.headers, endpoint_id)
        if refusal is not None:
            raise _error(refusal)
        body = await _body(request, _CONTROL_MAX, whole=True)
        assert isinstance(body, bytes)
        client = client_of(request.headers, request.client.host if request.client else "", user, False)
        if is_standard(request.method, request.headers, body):  # the standard transport: the MCP door answers
            return await agents.serve(services, pool, request, body, user, client, _client_left(request))
        return await _proxy_mcp(request, services, pool, body, traffic, client)
    body = await _body(request, services.settings.gateway_max_body_bytes)
    slot = pool.any_ready()
    if slot is None:
        raise _no_replica(endpoint_id)
    answer = await _send(request, services, pool, slot, path, body, traffic)
    return _passed_on(answer, services, slot, endpoint_id, path, traffic)


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


@dataclass
class _Answer:
    """A replica's answer, streaming, and what closes it (its connection's client too, for a retried request)."""

    response: httpx.Response
    close: Callable[[], Awaitable[None]]

    async def read(self, limit: int, endpoint_id: str) -> bytes:
        """The answer's body (decoded), read whole up to `limit`: over it, the replica's answer is refused (502)."""
        chunks, size = [], 0
        try:
            async for chunk in self.response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise UpstreamError(
                        f"endpoint {endpoint_id} answered with over {limit // 1024} KiB where the gateway reads "
                        "the answer whole; its server is misbehaving"
                    )
                chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise UpstreamError(f"endpoint {endpoint_id} broke off its answer ({type(exc).__name__})") from exc
        finally:
            await self.close()
        return b"".join(chunks)


async def _send(
    request: Request,
    services: Services,
    pool: Pool,
    slot: Slot,
    path: str,
    body: bytes | AsyncIterator[bytes],
    traffic: Traffic,
) -> _Answer:
    """The request's answer from a replica, unless the replica is lost first (it hung: no waiting out the timeout)."""
    lost, forget = _loss(pool, slot)
    sending: asyncio.Future[_Answer] = asyncio.ensure_future(_exchange(request, services, slot, path, body, traffic))
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
    request: Request,
    services: Services,
    slot: Slot,
    path: str,
    body: bytes | AsyncIterator[bytes],
    traffic: Traffic,
) -> _Answer:
    """The request sent to a replica; once more on a fresh connection when a kept-alive one turns out closed."""
    client = services.http
    assert client is not None, "envhub's HTTP client is made when it starts serving"
    endpoint_id = request.path_params["endpoint_id"]
    url = f"{slot.upstream.url}/{quote(path, safe=PATH_SAFE)}"
    if request.url.query:
        url += f"?{request.url.query}"
    headers = _upstream_headers(request, slot.upstream, gateway_path(endpoint_id))
    limit = services.settings.gateway_max_body_bytes

    def outbound(via: httpx.AsyncClient) -> httpx.Request:
        return via.build_request(request.method, url, headers=headers, content=body)

    try:
        try:
            response = await client.send(outbound(client), stream=True)
            return _Answer(response, response.aclose)
        except _STALE as exc:
            if not isinstance(body, bytes) or (
                request.method not in _IDEMPOTENT and not isinstance(exc, httpx.ConnectError)
            ):
                raise
        fresh = httpx.AsyncClient(timeout=client.timeout, limits=httpx.Limits(max_keepalive_connections=0))
        try:
            response = await fresh.send(outbound(fresh), stream=True)
        except BaseException:
            await fresh.aclose()
            raise

        async def close() -> None:
            await response.aclose()
            await fresh.aclose()

        return _Answer(response, close)
    except _TooLarge:
        traffic.request(failed=True)
        raise _too_large("the request's body", limit) from None
    except httpx.HTTPError as exc:
        if isinstance(exc.__context__, _TooLarge):
            traffic.request(failed=True)
            raise _too_large("the request's body", limit) from None
        traffic.request(failed=True)
        services.keeper.check_soon(endpoint_id)
        raise UpstreamError(
            f"endpoint {endpoint_id} is not answering ({type(exc).__name__}); it may have stopped"
        ) from exc


def _passed_on(
    answer: _Answer,
    services: Services,
    slot: Slot,
    endpoint_id: str,
    path: str,
    traffic: Traffic,
    content: bytes | None = None,
) -> Response:
    """The replica's answer as the client gets it: streamed, or `content` when the gateway read it whole."""
    response = answer.response
    dropped = _DROPPED | {"set-cookie"} | ({"content-encoding"} if content is not None else set())
    headers = {k: v for k, v in response.headers.items() if k.lower() not in dropped}
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
    if content is not None:
        return Response(content, status_code=response.status_code, headers=headers)
    return StreamingResponse(
        response.aiter_raw(),
        status_code=response.status_code,
        headers=headers,
        background=BackgroundTask(answer.close),
    )


async def _proxy_mcp(
    request: Request, services: Services, pool: Pool, body: bytes, traffic: Traffic, client: str
) -> Response:
    """POST /mcp: a session made here is pinned to the replica that made it, and its calls go there."""
    endpoint_id = pool.endpoint_id
    try:
        call = json.loads(body)
    except ValueError:
        call = None
    method = call.get("method") if isinstance(call, dict) else None
    params = call.get("params") if isinstance(call, dict) else None
    session_id = params.get("session_id") if isinstance(params, dict) else None
    if method == "openenv/session/create" and isinstance(call, dict):
        return await _create_mcp_session(request, services, pool, body, call, traffic, client)
    slot = (pool.pinned_slot(session_id) if isinstance(session_id, str) else None) or pool.any_ready()
    if slot is None:
        raise _no_replica(endpoint_id)
    answer = await _send(request, services, pool, slot, "mcp", body, traffic)
    if method == "openenv/session/close" and isinstance(session_id, str):
        content = await answer.read(_CONTROL_MAX, endpoint_id)
        result = _json(content).get("result")
        if isinstance(result, dict) and result.get("closed") is True:
            pool.unpin(session_id)
        elif isinstance(result, dict) and result.get("closing") is True:
            pool.close_when_detached(session_id)  # a socket is attached: the session ends with it
        return _passed_on(answer, services, slot, endpoint_id, "mcp", traffic, content)
    return _passed_on(answer, services, slot, endpoint_id, "mcp", traffic)


async def _create_mcp_session(
    request: Request,
    services: Services,
    pool: Pool,
    body: bytes,
    call: dict[str, Any],
    traffic: Traffic,
    client: str,
) -> Response:
    """A slot for the session (waiting while the client does), the session made on its replica and pinned there.

    A client that leaves while it waits gives its place up; one that left while its session was being made gets
    it closed on the replica, so no slot stays taken by a session nobody holds.
    """
    avoid: set[str] = set()
    waiter = Waiter(client, active=True)  # an MCP call is work: it may grow the pool
    left: asyncio.Future[None] = asyncio.ensure_future(_client_left(request))
    try:
        while True:
            try:
                slot = await _acquire(pool, services.settings.pool_queue_s, avoid, left, waiter)
            except PoolFull as full:
                refusal = rpc_capacity_error(call.get("id"), full.message, full.sessions, full.capacity)
                return Response(json.dumps(refusal), media_type="application/json")
            if slot is None:
                return Response(status_code=499)  # nobody is there to read it
            try:
                answer = await _send(request, services, pool, slot, "mcp", body, traffic)
                content = await answer.read(_CONTROL_MAX, pool.endpoint_id)
            except BaseException:
                pool.release(slot)
                raise
            parsed = _json(content)
            refused = rpc_capacity(parsed)
            if refused is not None:
                pool.refused(slot, _int(refused.get("max_sessions")))
                await _note_capacity(services, slot)
                avoid.add(slot.id)
                continue
            result = parsed.get("result")
            if not isinstance(result, dict) or not isinstance(result.get("session_id"), str):
                pool.release(slot)
            elif left.done():
                await close_on_replica(services.http, slot, result["session_id"])
                pool.release(slot)
            else:
                pool.accepted(slot)
                pool.activate(slot)
                pool.pin(result["session_id"], slot)
            return _passed_on(answer, services, slot, pool.endpoint_id, "mcp", traffic, content)
    finally:
        left.cancel()


async def _client_left(request: Request) -> None:
    """Returns once the HTTP client has gone: its body is read, so the next message is its disconnect."""
    while (await request.receive())["type"] != "http.disconnect":
        continue


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


async def relay_websocket(
    services: Services, path: str, query: str, client: Leg, headers: Mapping[str, str], peer: str
) -> None:
    """Relay a gateway session (`/endpoints/<id>/<path>`) whose handshake is done; return once it has ended."""
    match = _SESSION_PATH.match(path)
    assert match is not None, "the server hands over gateway paths only"
    endpoint_id = match["id"]
    inside = inner_path(match["path"])
    if inside is None:
        client.close(1008, f"the path leaves endpoint {endpoint_id}")
        return
    found = await _lookup(services, endpoint_id)
    if isinstance(found, Down):
        client.close(1011 if found.reason else 1008, found.reason or f"no endpoint {endpoint_id!r}")
        return
    refusal = origin_refusal(services, headers, endpoint_id)
    user = None
    if refusal is None:
        refusal, user = await admit(services, found, headers)
    if refusal is not None:
        client.close(1008, refusal.message)
        return
    session = Session(endpoint_id, client, services.endpoints.traffic.of(endpoint_id), services.settings.ws_ping_s)
    waiter = Waiter(client_of(headers, peer, user, services.settings.space_id is not None))
    try:
        await _run_session(services, found, inside, query, session, waiter)
    finally:
        session.end()


@router.websocket(gateway_path("{endpoint_id}") + "/{path:path}")
async def unrelayed_websocket(websocket: WebSocket, endpoint_id: str, path: str) -> None:
    """Reached only under another ASGI server (envhub's own relays gateway sessions before the app sees them)."""
    await websocket.accept()
    reason = f"this server cannot relay sessions to endpoint {endpoint_id}; serve envhub with `python -m app serve`"
    await websocket.close(code=1011, reason=reason[:123])


async def _run_session(services: Services, pool: Pool, path: str, query: str, session: Session, waiter: Waiter) -> None:
    """Place the session on a replica, moving it while replicas refuse, then relay it until either side ends."""
    endpoint_id = pool.endpoint_id
    attach = (parse_qs(query).get("session_id") or [""])[0]  # the MCP session a socket attaches to, if any
    pinned = pool.pinned_slot(attach) if attach else None
    avoid: set[str] = set()
    placed: list[Slot] = []  # the slot the session holds now, once it holds one

    def became_active() -> None:  # an active session is load: it may grow the pool, an idle socket may not
        waiter.active = True
        if placed:
            pool.activate(placed[0])
        else:
            pool.nudge()

    session.on_active = became_active
    waiter.active = session.active
    while True:
        if pinned is not None:
            slot, holds = pinned, False  # the MCP session it attaches to holds the slot
        else:
            try:
                taken = await _acquire(pool, services.settings.pool_queue_s, avoid, session.client.gone, waiter)
            except PoolFull as full:
                _refuse(session.client, path, full)
                return
            if taken is None:
                return  # the client left while it waited
            slot, holds = taken, True
            placed[:] = [slot]
            if session.active:
                pool.activate(slot)

        def let_go(slot: Slot = slot) -> None:
            placed.clear()
            pool.release(slot, active=session.active)

        try:
            upstream = await open_upstream(slot.upstream.url, path, query, slot.upstream.headers, _CONNECT_S)
        except (OSError, HandshakeError, TimeoutError) as exc:  # closed: not listening yet
            if holds:
                let_go()
            session.traffic.request(failed=True)
            if isinstance(exc, HandshakeError) and exc.status is not None and exc.status < 500:
                # It answered, and refused: every replica of the endpoint serves the same app.
                reason = f"the environment's server refused the WebSocket (HTTP {exc.status}): it serves no /{path}"
                session.client.close(1011, reason)
                return
            services.keeper.check_soon(endpoint_id)
            if holds and slot.id not in avoid and len(avoid) + 1 < len(pool.slots):
                avoid.add(slot.id)  # another replica may answer
                continue
            status = f" (HTTP {exc.status})" if isinstance(exc, HandshakeError) and exc.status else ""
            session.client.close(1011, f"endpoint {endpoint_id} is not answering{status}")
            return
        lost, forget = _loss(pool, slot)
        outcome = "ended"
        if not holds:
            pool.attached(attach, +1)
        try:
            on_confirmed = functools.partial(pool.accepted, slot) if holds else (lambda: None)
            outcome = await session.run(upstream, lost, on_confirmed)
        finally:
            forget()
            lost.cancel()
            if not holds:
                pool.attached(attach, -1)
            if holds and outcome != "refused":
                let_go()
        if session.replica_lost:
            services.keeper.check_soon(endpoint_id)
        if outcome != "refused":
            if attach:
                pool.detached(attach)
            return
        refused = session.refused or {}
        if holds:
            placed.clear()
            pool.refused(slot, _int(refused.get("max_sessions")), active=session.active)
            await _note_capacity(services, slot)
        avoid.add(slot.id)
        pinned = None


async def _acquire(
    pool: Pool, queue_s: float, avoid: set[str], gone: "asyncio.Future[None]", waiter: Waiter
) -> Slot | None:
    """A slot for the session, waiting for one as long as the pool lets it wait; None if the client leaves first."""
    acquiring: asyncio.Future[Any] = asyncio.ensure_future(pool.acquire(queue_s, frozenset(avoid), waiter))
    await asyncio.wait([acquiring, gone], return_when=asyncio.FIRST_COMPLETED)
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
