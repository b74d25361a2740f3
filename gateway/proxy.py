"""HTTP through the gateway: each request to /endpoints/{id}/... answered by one of the endpoint's replicas.

Stateless HTTP is spread over the ready replicas; an MCP session made with `openenv/session/create` is pinned
to the replica that made it (gateway.pools), and its calls go there. Bodies are bounded (1 MiB for a JSON-RPC
call, ENVHUB_GATEWAY_MAX_BODY_BYTES for the rest); answers stream through, but for the few the gateway reads
whole (1 MiB). A request whose replica is lost is answered at once (502, saying why); a POST that may have
reached its server is never sent twice. envhub's credentials never travel on, and a server's redirect stays
inside its endpoint.
"""

import asyncio
import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse

from core.errors import BadRequestError, EndpointStartingError, NotFoundError, PayloadTooLargeError, UpstreamError
from core.outbound import read_capped
from gateway.gate import admit, client_of, origin_refusal
from gateway.jsonbody import read_json
from gateway.mcp import is_standard
from gateway.paths import PATH_SAFE, gateway_location, gateway_path, inner_path
from gateway.pinned import close_on_replica
from gateway.placement import Placement, Refused
from gateway.pools import Pool
from gateway.slots import PoolFull, Slot, Upstream
from gateway.traffic import Traffic
from gateway.wiring import Down, Gateway
from protocol.frames import rpc_capacity, rpc_capacity_error

__all__ = ["Door", "as_int", "client_left", "not_found", "proxy", "ready", "watch_loss"]

# The MCP door, for standard MCP requests: (pool, request, body, user, client, a watch on the client's leaving) ->
# its answer. The watch is made only by a request that waits (an initialize, for a slot).
Door = Callable[[Pool, Request, bytes, str | None, str, Callable[[], Coroutine[Any, Any, None]]], Awaitable[Response]]

# Hop-by-hop headers (RFC 9110 §7.6.1) and ones the proxy sets itself.
_DROPPED = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length",
}  # fmt: skip
# Credentials meant for envhub never travel on to an environment's server.
_PRIVATE = {"authorization", "cookie", "x-csrf-token"}
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


def not_found(endpoint_id: str) -> NotFoundError:
    return NotFoundError(f"no endpoint {endpoint_id!r}; list them with GET /api/endpoints", code="endpoint_unknown")


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


def ready(found: Pool | Down, endpoint_id: str) -> Pool:
    if isinstance(found, Down):
        if found.reason is None:
            raise not_found(endpoint_id)
        if found.ended:  # gone for good: a 404 clients do not retry, not a 502 they would
            raise NotFoundError(f"{found.reason}; launch it again for a new URL", code="endpoint_stopped")
        raise EndpointStartingError(f"{found.reason}; retry in a few seconds")  # a 503 clients retry, not a 502
    return found


def _no_replica(endpoint_id: str) -> EndpointStartingError:
    return EndpointStartingError(
        f"endpoint {endpoint_id} has no ready replica now (one is starting or being replaced); retry in a few seconds"
    )


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
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise _too_large("the request's body", limit)
                chunks.append(chunk)
        except ClientDisconnect:  # it left, or its body was too slow (gateway.server answered 408): no traceback
            raise BadRequestError("the client left before its request's body arrived whole") from None
        return b"".join(chunks)
    return _capped(request.stream(), limit)


async def _capped(stream: AsyncIterator[bytes], limit: int) -> AsyncIterator[bytes]:
    size = 0
    async for chunk in stream:
        size += len(chunk)
        if size > limit:
            raise _TooLarge()
        yield chunk


async def proxy(gateway: Gateway, request: Request, endpoint_id: str, path: str, door: Door | None = None) -> Response:
    """A request to an endpoint's gateway path, answered by one of its replicas (or, for a standard MCP request,
    by `door`, the MCP door the app provides)."""
    inside = inner_path(path)
    if inside is None:
        raise BadRequestError(f"{path!r} leaves endpoint {endpoint_id}; ask for a path inside it")
    path = inside
    pool = ready(await gateway.routes.pool(endpoint_id), endpoint_id)
    refusal, user = await admit(gateway, pool, request.headers)
    if refusal is not None:
        raise refusal.error()
    traffic = gateway.traffic.of(endpoint_id)
    if path == "mcp" and request.method in ("POST", "GET", "DELETE"):
        refusal = origin_refusal(gateway, request.headers, endpoint_id)
        if refusal is not None:
            raise refusal.error()
        body = await _body(request, _CONTROL_MAX, whole=True)
        assert isinstance(body, bytes)
        # envhub's server hands /mcp requests to the gateway past uvicorn's proxy headers: the peer is the socket's,
        # and behind a proxy the client is the address it forwarded, as for a WebSocket session.
        peer = request.client.host if request.client else ""
        client = client_of(request.headers, peer, user, gateway.settings.behind_proxy)
        if door is not None and is_standard(request.method, request.headers, body):
            return await door(pool, request, body, user, client, functools.partial(client_left, request))
        return await _proxy_mcp(request, gateway, pool, body, traffic, client)
    body = await _body(request, gateway.settings.max_body_bytes)
    slot = pool.any_ready()
    if slot is None:
        raise _no_replica(endpoint_id)
    answer = await _send(request, gateway, pool, slot, path, body, traffic)
    return _passed_on(answer, gateway, slot, endpoint_id, path, traffic)


def watch_loss(pool: Pool, slot: Slot) -> tuple["asyncio.Future[str]", Callable[[], None]]:
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
        try:
            content, more = await read_capped(self.response, limit)
        except httpx.HTTPError as exc:
            raise UpstreamError(f"endpoint {endpoint_id} broke off its answer ({type(exc).__name__})") from exc
        finally:
            await self.close()
        if more:
            raise UpstreamError(
                f"endpoint {endpoint_id} answered with over {limit // 1024} KiB where the gateway reads the answer "
                "whole; its server is misbehaving"
            )
        return content


async def _send(
    request: Request,
    gateway: Gateway,
    pool: Pool,
    slot: Slot,
    path: str,
    body: bytes | AsyncIterator[bytes],
    traffic: Traffic,
) -> _Answer:
    """The request's answer from a replica, unless the replica is lost first (it hung: no waiting out the timeout)."""
    lost, forget = watch_loss(pool, slot)
    sending: asyncio.Future[_Answer] = asyncio.ensure_future(_exchange(request, gateway, slot, path, body, traffic))
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
    gateway: Gateway,
    slot: Slot,
    path: str,
    body: bytes | AsyncIterator[bytes],
    traffic: Traffic,
) -> _Answer:
    """The request sent to a replica; once more on a fresh connection when a kept-alive one turns out closed."""
    client = gateway.http
    assert client is not None, "envhub's HTTP client is made when it starts serving"
    endpoint_id = request.path_params["endpoint_id"]
    url = f"{slot.upstream.url}/{quote(path, safe=PATH_SAFE)}"
    if request.url.query:
        url += f"?{request.url.query}"
    headers = _upstream_headers(request, slot.upstream, gateway_path(endpoint_id))
    limit = gateway.settings.max_body_bytes

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
        gateway.routes.check_soon(endpoint_id)
        raise UpstreamError(
            f"endpoint {endpoint_id} is not answering ({type(exc).__name__}); it may have stopped"
        ) from exc


def _passed_on(
    answer: _Answer,
    gateway: Gateway,
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
                f"endpoint {endpoint_id} redirected outside itself (to {location[:200]!r}); envhub does not follow",
                code="redirect_outside",
            )
        headers["location"] = kept
    traffic.request(failed=response.status_code >= 500)
    if gateway.settings.sandbox_pages:
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
    request: Request, gateway: Gateway, pool: Pool, body: bytes, traffic: Traffic, client: str
) -> Response:
    """POST /mcp: a session made here is pinned to the replica that made it, and its calls go there."""
    endpoint_id = pool.endpoint_id
    try:
        call = read_json(body)
    except ValueError:
        call = None
    method = call.get("method") if isinstance(call, dict) else None
    params = call.get("params") if isinstance(call, dict) else None
    session_id = params.get("session_id") if isinstance(params, dict) else None
    if method == "openenv/session/create" and isinstance(call, dict):
        return await _create_mcp_session(request, gateway, pool, body, call, traffic, client)
    pinned = pool.pinned_slot(session_id) if isinstance(session_id, str) else None
    if pinned is not None and isinstance(session_id, str) and method != "openenv/session/close":
        pool.work(session_id)
    slot = pinned or pool.any_ready()
    if slot is None:
        raise _no_replica(endpoint_id)
    answer = await _send(request, gateway, pool, slot, "mcp", body, traffic)
    if method == "openenv/session/close" and isinstance(session_id, str):
        content = await answer.read(_CONTROL_MAX, endpoint_id)
        result = _json(content).get("result")
        if isinstance(result, dict) and result.get("closed") is True:
            pool.unpin(session_id)
        elif isinstance(result, dict) and result.get("closing") is True:
            pool.close_when_detached(session_id)  # a socket is attached: the session ends with it
        return _passed_on(answer, gateway, slot, endpoint_id, "mcp", traffic, content)
    return _passed_on(answer, gateway, slot, endpoint_id, "mcp", traffic)


async def _create_mcp_session(
    request: Request,
    gateway: Gateway,
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
    # An MCP call is work: it may grow the pool while it waits; its slot is load once it asks for work (Pool.work).
    placement = Placement(gateway, pool, client, presses=True)
    left: asyncio.Future[None] = asyncio.ensure_future(client_left(request))

    async def attempt(slot: Slot) -> tuple[_Answer, bytes, dict[str, Any]]:
        answer = await _send(request, gateway, pool, slot, "mcp", body, traffic)
        content = await answer.read(_CONTROL_MAX, pool.endpoint_id)
        parsed = _json(content)
        refused = rpc_capacity(parsed)
        if refused is not None:
            raise Refused(as_int(refused.get("max_sessions")))
        return answer, content, parsed

    try:
        try:
            placed = await placement.place(left, attempt)
        except PoolFull as full:
            refusal = rpc_capacity_error(call.get("id"), full.message, full.sessions, full.capacity, full.facts)
            return Response(json.dumps(refusal), media_type="application/json")
        if placed is None:
            return Response(status_code=499)  # nobody is there to read it
        slot, (answer, content, parsed) = placed
        result = parsed.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("session_id"), str):
            placement.release(slot)
        elif left.done():
            await close_on_replica(gateway.http, slot, result["session_id"])
            placement.release(slot)
        else:
            placement.accepted(slot)
            pool.pin(result["session_id"], slot, client)  # load once it asks for work (Pool.work), not before
        return _passed_on(answer, gateway, slot, pool.endpoint_id, "mcp", traffic, content)
    finally:
        left.cancel()


async def client_left(request: Request) -> None:
    """Returns once the HTTP client has gone: its body is read, so the next message is its disconnect."""
    while (await request.receive())["type"] != "http.disconnect":
        continue


def _json(content: bytes) -> dict[str, Any]:
    try:
        parsed = read_json(content)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
