"""The gateway: /endpoints/{id}/... proxies HTTP and WebSocket traffic to a running endpoint.

It is the one URL a trainer is given. Frames stream through unbuffered, close codes and
reasons pass through, and a dead endpoint answers at once: 502 JSON over HTTP, close
code 1011 with a reason over WebSocket.
"""

import asyncio
import time
from contextlib import suppress

import httpx
import websockets
from fastapi import APIRouter, Request, WebSocket
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask
from starlette.websockets import WebSocketDisconnect
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from app.api.deps import ServicesDep
from core.errors import BadRequestError, NotFoundError, UpstreamError
from hosting.endpoints import EndpointManager
from hosting.reconcile import Keeper
from hosting.routing import Upstream, gateway_location, gateway_path, inner_path
from hosting.traffic import Traffic
from protocol.frames import is_error_text, is_step_text

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


@router.api_route(gateway_path("{endpoint_id}"), methods=_METHODS, include_in_schema=False)
@router.api_route(gateway_path("{endpoint_id}") + "/{path:path}", methods=_METHODS, include_in_schema=False)
async def proxy_http(request: Request, services: ServicesDep, endpoint_id: str, path: str = "") -> Response:
    manager = services.endpoints
    inside = inner_path(path)
    if inside is None:
        raise BadRequestError(f"{path!r} leaves endpoint {endpoint_id}; ask for a path inside it")
    path = inside
    upstream = manager.routes.resolve(endpoint_id)
    if upstream is None:
        reason = _down(manager, endpoint_id)
        raise _not_found(endpoint_id) if reason is None else UpstreamError(reason)
    traffic = manager.traffic.of(endpoint_id)
    client = services.http
    assert client is not None, "envhub's HTTP client is made when it starts serving"
    url = f"{upstream.url}/{path}"
    if request.url.query:
        url += f"?{request.url.query}"
    prefix = gateway_path(endpoint_id)
    outbound = client.build_request(
        request.method,
        url,
        headers=_upstream_headers(request, upstream, prefix),
        content=request.stream(),
    )
    try:
        response = await client.send(outbound, stream=True)
    except httpx.HTTPError as exc:
        traffic.request(failed=True)
        services.keeper.check_soon(endpoint_id)
        raise UpstreamError(
            f"endpoint {endpoint_id} is not answering ({type(exc).__name__}); it may have stopped"
        ) from exc
    headers = {k: v for k, v in response.headers.items() if k.lower() not in _DROPPED | {"set-cookie"}}
    location = headers.get("location")
    if location is not None:
        # Keep redirects (such as /web -> /web/) inside the gateway; one to another site is not passed on.
        kept = gateway_location(location, upstream.url, endpoint_id, path)
        if kept is None:
            await response.aclose()
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
    return StreamingResponse(
        response.aiter_raw(),
        status_code=response.status_code,
        headers=headers,
        background=BackgroundTask(response.aclose),
    )


async def _client_to_upstream(websocket: WebSocket, upstream: ClientConnection, pending: list[float]) -> None:
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            await upstream.close(code=message.get("code", 1000), reason=message.get("reason") or "")
            return
        text = message.get("text")
        if text is not None:
            if is_step_text(text):
                pending.append(time.perf_counter())
            await upstream.send(text)
        elif message.get("bytes") is not None:
            await upstream.send(message["bytes"])


async def _upstream_to_client(
    websocket: WebSocket, upstream: ClientConnection, pending: list[float], traffic: Traffic
) -> None:
    async for frame in upstream:
        if pending:
            started = pending.pop(0)
            failed = isinstance(frame, str) and is_error_text(frame)
            traffic.step(time.perf_counter() - started, failed=failed)
        if isinstance(frame, str):
            await websocket.send_text(frame)
        else:
            await websocket.send_bytes(frame)


@router.websocket(gateway_path("{endpoint_id}") + "/{path:path}")
async def proxy_websocket(websocket: WebSocket, services: ServicesDep, endpoint_id: str, path: str) -> None:
    manager = services.endpoints
    resolved = manager.routes.resolve(endpoint_id)
    await websocket.accept()
    inside = inner_path(path)
    if inside is None:
        await websocket.close(code=1008, reason=f"the path leaves endpoint {endpoint_id}")
        return
    path = inside
    if resolved is None:
        reason = _down(manager, endpoint_id) or f"no endpoint {endpoint_id!r}"
        await websocket.close(code=1011 if _down(manager, endpoint_id) else 1008, reason=reason[:120])
        return
    target = "ws" + resolved.url.removeprefix("http") + f"/{path}"
    if websocket.url.query:
        target += f"?{websocket.url.query}"
    traffic = manager.traffic.of(endpoint_id)
    try:
        upstream = await websockets.connect(
            target,
            max_size=_MAX_FRAME,
            open_timeout=10,
            ping_interval=None,
            compression=None,
            proxy=None,
            additional_headers=resolved.headers,
        )
    except (OSError, InvalidHandshake, TimeoutError) as exc:
        traffic.request(failed=True)
        services.keeper.check_soon(endpoint_id)
        status = f" (HTTP {exc.response.status_code})" if isinstance(exc, InvalidStatus) else ""
        await websocket.close(code=1011, reason=f"endpoint {endpoint_id} is not answering{status}")
        return
    traffic.session_opened()
    pending: list[float] = []
    pumps = [
        asyncio.create_task(_client_to_upstream(websocket, upstream, pending)),
        asyncio.create_task(_upstream_to_client(websocket, upstream, pending, traffic)),
    ]
    try:
        done, _ = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for task in pumps:
            task.cancel()
        for task in done:
            if task.exception() is not None and not isinstance(
                task.exception(), (ConnectionClosed, WebSocketDisconnect)
            ):
                raise task.exception()  # type: ignore[misc]
    finally:
        traffic.session_closed()
        await upstream.close()
    await _close_like_upstream(websocket, upstream, endpoint_id, services.keeper)


async def _close_like_upstream(
    websocket: WebSocket, upstream: ClientConnection, endpoint_id: str, keeper: Keeper
) -> None:
    """Pass the upstream's close code and reason on; an abrupt end becomes 1011 with a reason."""
    if upstream.close_code is not None and upstream.close_code not in (1005, 1006):
        code, reason = upstream.close_code, upstream.close_reason or ""
    else:
        keeper.check_soon(endpoint_id)
        code, reason = 1011, f"endpoint {endpoint_id} closed the connection unexpectedly"
    with suppress(RuntimeError, WebSocketDisconnect):  # the client may already have gone
        await websocket.close(code=code, reason=reason)
