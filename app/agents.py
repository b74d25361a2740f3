"""The MCP door's side of envhub: the gateway's pools as the door's placement (its recorder is
app/agent_recorder.py), and the hand-over of an endpoint's standard MCP requests to it (`PooledDoor`, which the
gateway calls; `McpApp` answers requests to /mcp, which envhub's server hands it past the app's middleware and routing).
"""

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from core.errors import EnvhubError
from gateway.mcp import Door, HttpRequest, PoolFull, Seat
from gateway.paths import session_path
from gateway.pools import Pool, Slot, Waiter
from gateway.pools import PoolFull as SlotsTaken
from gateway.ports import Gateway
from gateway.proxy import proxy
from gateway.traffic import Traffic
from hosting.endpoints import EndpointManager

__all__ = ["McpApp", "PoolPlacement", "PooledDoor"]


class PoolPlacement:
    """An endpoint's pool as the door takes slots from it, for one MCP session: it waits in the same queue as `/ws`
    sessions, counted against the same client, and is load that may grow the pool once its client calls a tool
    (as a `/ws` session is once it sends something), not for having opened."""

    def __init__(
        self, pool: Pool, endpoints: EndpointManager, check_soon: Callable[[str], None], queue_s: float, client: str
    ) -> None:
        self.pool, self.endpoints, self.check_soon, self.queue_s = pool, endpoints, check_soon, queue_s
        self.endpoint_id, self.client = pool.endpoint_id, client
        self.traffic: Traffic = endpoints.traffic.of(pool.endpoint_id)
        self.waiter = Waiter(client)  # active once the session's client calls a tool; its slot is then activated

    @property
    def replicas(self) -> int:
        return self.pool.load()[2]

    async def take(self, avoid: frozenset[str], gone: "asyncio.Future[None]") -> Seat | None:
        acquiring: asyncio.Future[Slot] = asyncio.ensure_future(self.pool.acquire(self.queue_s, avoid, self.waiter))
        waited: list[asyncio.Future[Any]] = [acquiring, gone]
        await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        if not acquiring.done():
            acquiring.cancel()
            try:
                slot = await acquiring
            except (asyncio.CancelledError, SlotsTaken):
                return None
            self.pool.release(slot, client=self.waiter.client)
            return None
        try:
            slot = acquiring.result()
        except SlotsTaken as full:
            raise PoolFull(full.message, full.sessions, full.capacity, full.limit) from full
        if self.waiter.active:
            self.pool.activate(slot)
        return Seat(slot.id, slot.upstream.url, slot.upstream.headers, slot)

    def accepted(self, seat: Seat) -> None:
        self.pool.accepted(_slot(seat))

    def activate(self, seat: Seat) -> None:
        if not self.waiter.active:
            self.waiter.active = True
            self.pool.activate(_slot(seat))

    async def refused(self, seat: Seat, max_sessions: int | None) -> None:
        slot = _slot(seat)
        self.pool.refused(slot, max_sessions, active=self.waiter.active, client=self.waiter.client)
        if slot.said:
            await asyncio.to_thread(self.endpoints.replica_store.note_capacity, slot.id, slot.capacity)

    def unreachable(self, seat: Seat) -> None:
        self.release(seat)
        self.traffic.request(failed=True)
        self.check_soon(self.endpoint_id)

    def release(self, seat: Seat) -> None:
        self.pool.release(_slot(seat), active=self.waiter.active, client=self.waiter.client)

    def watch_loss(self, seat: Seat, tell: Callable[[str], None]) -> Callable[[], None]:
        return self.pool.watch_loss(_slot(seat), tell)


def _slot(seat: Seat) -> Slot:
    assert isinstance(seat.handle, Slot), "seats are made by PoolPlacement"
    return seat.handle


@dataclass(frozen=True)
class PooledDoor:
    """The MCP door as the gateway hands it an endpoint's standard MCP requests (gateway.proxy's `door`), each
    seated in the endpoint's pool."""

    mcp: Door
    endpoints: EndpointManager
    check_soon: Callable[[str], None]  # the keeper's: told of a replica that did not answer
    queue_s: float  # how long a request waits for a slot

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
        placement = PoolPlacement(pool, self.endpoints, self.check_soon, self.queue_s, client)
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
