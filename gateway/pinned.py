"""MCP sessions made over HTTP and pinned to a replica: closed there when their client is gone.

A session a client made with `openenv/session/create` and then left holds its replica's slot until the
server is told to close it. The gateway closes one whose client left while it was being made, and a round
closes those nobody has called, nor attached a socket to, for a while.
"""

import contextlib

import httpx

from gateway.slots import Slot
from gateway.wiring import ControlPlane

__all__ = ["close_on_replica", "close_stale"]


async def close_on_replica(client: httpx.AsyncClient | None, slot: Slot, session_id: str) -> None:
    """Close an MCP session on its replica; one that does not answer has lost it anyway."""
    assert client is not None, "envhub's HTTP client is made when it starts serving"
    params = {"session_id": session_id}
    call = {"jsonrpc": "2.0", "id": "envhub-close", "method": "openenv/session/close", "params": params}
    with contextlib.suppress(httpx.HTTPError):
        await client.post(f"{slot.upstream.url}/mcp", json=call, headers=slot.upstream.headers, timeout=10)


async def close_stale(routes: ControlPlane, client: httpx.AsyncClient | None, idle_s: float) -> None:
    """Sessions nobody has used for idle_s: closed on their replicas, their slots freed."""
    for pool in routes.pools():
        for session_id, slot in pool.stale(idle_s):
            await close_on_replica(client, slot, session_id)
            pool.unpin(session_id)
