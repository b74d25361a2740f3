"""The gateway's routes in the app: /endpoints/{id}/... over HTTP, answered by the data plane (gateway.proxy).

It is the one URL a trainer is given (and an agent harness: a standard MCP request to /mcp goes to the MCP door,
gateway.mcp, through app.mcp_door). WebSocket sessions never reach these routes under envhub's own server, which
hands them to the relay before the app sees them (gateway.server); under another ASGI server they are refused,
saying so.
"""

from fastapi import APIRouter, Request, WebSocket
from fastapi.responses import Response

from app.api.deps import DoorDep, GatewayDep
from gateway.paths import gateway_path
from gateway.proxy import proxy

router = APIRouter(tags=["gateway"])

_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


@router.api_route(gateway_path("{endpoint_id}"), methods=_METHODS, include_in_schema=False)
@router.api_route(gateway_path("{endpoint_id}") + "/{path:path}", methods=_METHODS, include_in_schema=False)
async def proxy_http(
    request: Request, gateway: GatewayDep, door: DoorDep, endpoint_id: str, path: str = ""
) -> Response:
    return await proxy(gateway, request, endpoint_id, path, door=door.serve)


@router.websocket(gateway_path("{endpoint_id}") + "/{path:path}")
async def unrelayed_websocket(websocket: WebSocket, endpoint_id: str, path: str) -> None:
    """Reached only under another ASGI server (envhub's own relays gateway sessions before the app sees them)."""
    await websocket.accept()
    reason = f"this server cannot relay sessions to endpoint {endpoint_id}; serve envhub with `python -m app serve`"
    await websocket.close(code=1011, reason=reason[:123])
