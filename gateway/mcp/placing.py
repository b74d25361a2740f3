"""Placing an MCP session: a slot of the endpoint's pool and a socket to its replica's `/ws`, or why there is none."""

import asyncio
import contextlib
import json
from typing import Any

from gateway.legs import HandshakeError
from gateway.mcp.upstream import Upstream, UpstreamClosed, connect_upstream
from gateway.placement import Placement, Refused, Unreachable
from gateway.slots import Slot
from protocol.frames import capacity, error_code

__all__ = ["MAX_MESSAGE", "Unavailable", "open_socket"]

MAX_MESSAGE = 16 * 1024 * 1024  # the largest answer a replica may send the door


class Unavailable(Exception):
    """No replica could hold the session: why, for the client."""


async def open_socket(
    placement: Placement, gone: "asyncio.Future[None]", probe: dict[str, Any], *, connect_s: float, ping_s: float
) -> tuple[Slot, Upstream, dict[str, Any]]:
    """A slot and a socket to its replica's `/ws`, placed as every door's session is (gateway.placement); and the
    replica's answer to `probe`, the first frame sent. PoolFull when every slot stays taken."""
    endpoint_id = placement.endpoint_id

    async def attempt(slot: Slot) -> tuple[Upstream, dict[str, Any]]:
        url, headers = slot.upstream.url, dict(slot.upstream.headers)
        try:
            socket = await connect_upstream(url, headers, timeout_s=connect_s, ping_s=ping_s, max_size=MAX_MESSAGE)
        except (OSError, HandshakeError, TimeoutError) as exc:
            raise Unreachable(f"endpoint {endpoint_id} is not answering ({type(exc).__name__})") from exc
        with contextlib.suppress(UpstreamClosed):  # a server that refused at once has closed: its refusal is read
            await socket.send(json.dumps(probe))
        try:
            first = json.loads(await asyncio.wait_for(socket.recv(), timeout=connect_s + 30))
        except (UpstreamClosed, TimeoutError, ValueError) as exc:
            await socket.close()
            raise Unreachable(f"endpoint {endpoint_id} dropped the session as it opened", retry=False) from exc
        refused = capacity(first)
        if refused is not None:
            await socket.close()
            most = refused.get("max_sessions")
            raise Refused(most if isinstance(most, int) and not isinstance(most, bool) else None)
        if error_code(first) is not None:
            await socket.close()
            message = first.get("data", {}).get("message") if isinstance(first.get("data"), dict) else None
            raise Unavailable(f"endpoint {endpoint_id} could not open a session: {message or first}")
        return socket, first

    try:
        placed = await placement.place(gone, attempt)
    except Unreachable as exc:
        raise Unavailable(exc.why) from exc
    if placed is None:
        raise Unavailable("the client left while its session waited for a slot")
    slot, (socket, first) = placed
    placement.accepted(slot)
    return slot, socket, first
