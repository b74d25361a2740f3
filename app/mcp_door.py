"""The MCP door's side of envhub (its recorder is app/agent_recorder.py): the hand-over of an endpoint's standard
MCP requests to it (`PooledDoor`, which the gateway calls; `McpApp` answers requests to /mcp, which envhub's server
hands it past the app's middleware and routing)."""

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from core.errors import EnvhubError
from gateway.mcp import Door, HttpRequest
from gateway.paths import session_path
from gateway.placement import Placement
from gateway.pools import Pool
from gateway.proxy import proxy
from gateway.wiring import Gateway

__all__ = ["McpApp", "PooledDoor"]


@dataclass(frozen=True)
class PooledDoor:
    """The MCP door as the gateway hands it an endpoint's standard MCP requests (gateway.proxy's `door`), each
    seated in the endpoint's pool."""

    mcp: Door
    gateway: Gateway  # each session is placed in its endpoint's pool through the gateway's port (gateway.placement)

    async def serve(
        self,
        pool: Pool,
        request: Request,
        body: bytes,
        user: str | None,
        client: str,
        client_left: Callable[[], Coroutine[Any, Any, None]],
    ) -> Response:
        """A standard MCP request to the endpoint's /mcp, answered by the door."""
        placement = Placement(self.gateway, pool, client)  # load once its client calls a tool, not for opening
        query = request.query_params if request.scope.get("query_string") else {}  # (parsed only when there is one)
        asked = HttpRequest(request.method, request.headers, body, user, query)
        reply = await self.mcp.handle(asked, placement, client_left)
        placement.traffic.request(failed=reply.status >= 500)
        if isinstance(reply.body, bytes):
            return Response(reply.body, status_code=reply.status, headers=reply.headers)
        return StreamingResponse(reply.body, status_code=reply.status, headers=reply.headers)


class McpApp:
    """The ASGI app of every HTTP request to an endpoint's /mcp: the gateway's (its MCP door, or OpenEnv's own
    JSON-RPC passed on), as the gateway's route would answer it. envhub's server hands such requests to it directly
    (gateway.server), past the app's middleware and FastAPI's routing and dependency injection: an agent's tool
    call through the door is measured against the server's own /mcp (bench/mcp.py), and those cost each call a
    tenth of the round trip. Under another ASGI server the gateway's route answers them, the same way."""

    def __init__(self, gateway: Gateway, door: PooledDoor) -> None:
        self.gateway, self.door = gateway, door

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = session_path(scope["path"])
        assert found is not None and found[1] == "mcp", "envhub's server hands this app requests to /mcp only"
        endpoint_id = found[0]
        scope = {**scope, "path_params": {"endpoint_id": endpoint_id, "path": "mcp"}}  # as the route's would be
        try:
            response = await proxy(self.gateway, Request(scope, receive), endpoint_id, "mcp", door=self.door.serve)
        except EnvhubError as exc:
            response = JSONResponse(exc.payload(), status_code=exc.status_code, headers=exc.headers())
        await response(scope, receive, send)
