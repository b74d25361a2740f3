"""WebSocket sessions through the gateway: each placed on a replica of its endpoint's pool, then relayed.

Each new session goes to the replica with the most free slots (gateway.pools); a replica that refuses it at
capacity before answering anything is left for another, unseen by the client, and when every slot is taken the
session waits for one (envhub its peer meanwhile: gateway.relay). A socket that attaches to an MCP session made
over HTTP reaches the replica that holds it. A session whose replica dies or hangs is closed with 1011 and a
reason saying it was lost; a dead endpoint answers at once with 1011, an unknown one with 1008.
"""

import functools
import json
import time
from collections.abc import Mapping
from urllib.parse import parse_qs

from gateway.gate import admit, client_of, origin_refusal
from gateway.paths import inner_path, session_path
from gateway.pools import Pool, PoolFull, Slot, Waiter, acquire_unless_gone
from gateway.ports import Down, Gateway
from gateway.proxy import as_int, note_capacity, watch_loss
from gateway.relay import HandshakeError, Leg, Session, open_upstream
from gateway.wire import TEXT, frame
from protocol.frames import capacity_frame, rpc_capacity_error

__all__ = ["serve_session"]

_CONNECT_S = 10  # how long a replica has to accept a WebSocket


async def serve_session(
    gateway: Gateway, path: str, query: str, client: Leg, headers: Mapping[str, str], peer: str
) -> None:
    """Relay a gateway session (`/endpoints/<id>/<path>`) whose handshake is done; return once it has ended."""
    found_path = session_path(path)
    assert found_path is not None, "the server hands over gateway paths only"
    endpoint_id, asked = found_path
    inside = inner_path(asked)
    if inside is None:
        client.close(1008, f"the path leaves endpoint {endpoint_id}")
        return
    found = await gateway.routes.pool(endpoint_id)
    if isinstance(found, Down):
        # Starting: try again later (1013, as HTTP's 503); unknown or ended: refused for good (1008).
        client.close(1013 if found.reason and not found.ended else 1008, found.reason or f"no endpoint {endpoint_id!r}")
        return
    refusal = origin_refusal(gateway, headers, endpoint_id)
    user = None
    if refusal is None:
        refusal, user = await admit(gateway, found, headers)
    if refusal is not None:
        client.close(1008, refusal.message)
        return
    session = Session(endpoint_id, client, gateway.traffic.of(endpoint_id), gateway.settings.ws_ping_s)
    waiter = Waiter(client_of(headers, peer, user, gateway.settings.behind_proxy))
    try:
        await _run_session(gateway, found, inside, query, session, waiter)
    finally:
        session.end()


async def _run_session(gateway: Gateway, pool: Pool, path: str, query: str, session: Session, waiter: Waiter) -> None:
    """Place the session on a replica, moving it while replicas refuse, then relay it until either side ends."""
    endpoint_id = pool.endpoint_id
    attach = (parse_qs(query).get("session_id") or [""])[0]  # the MCP session a socket attaches to, if any
    pinned = pool.pinned_slot(attach) if attach else None
    avoid: set[str] = set()
    placed: list[Slot] = []  # the slot the session holds now, once it holds one
    # One wait per session, however many replicas refuse it: the pool answers within ENVHUB_POOL_QUEUE_S.
    deadline = time.monotonic() + gateway.settings.pool_queue_s

    def became_active() -> None:  # an active session is load: it may grow the pool, an idle socket may not
        waiter.active = True
        if placed:
            pool.activate(placed[0])
        elif pinned is not None:
            pool.work(attach)  # the MCP session it attaches to works now
        else:
            pool.nudge()

    session.on_active = became_active
    waiter.active = session.active
    while True:
        if pinned is not None:
            slot, holds = pinned, False  # the MCP session it attaches to holds the slot
        else:
            try:
                left = max(0.0, deadline - time.monotonic())
                taken = await acquire_unless_gone(pool, left, avoid, session.client.gone, waiter)
            except PoolFull as full:
                full.waited_s = gateway.settings.pool_queue_s  # its whole wait, over every replica that refused it
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
            pool.release(slot, active=session.active, client=waiter.client)

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
            gateway.routes.check_soon(endpoint_id)
            if holds and slot.id not in avoid and len(avoid) + 1 < len(pool.slots):
                avoid.add(slot.id)  # another replica may answer
                continue
            status = f" (HTTP {exc.status})" if isinstance(exc, HandshakeError) and exc.status else ""
            session.client.close(1011, f"endpoint {endpoint_id} is not answering{status}")
            return
        lost, forget = watch_loss(pool, slot)

        def heard(leg: Leg = upstream) -> float:
            return leg.heard

        forget_heard = slot.hearing(id(session), heard)
        outcome = "ended"
        if not holds:
            pool.attached(attach, +1)
        # A session holding its own slot gives it to a waiting one once idle; one attached to an MCP session does not.
        session.idle_s = gateway.settings.ws_idle_s if holds else 0
        session.wanted = lambda: pool.waiting > 0
        try:
            on_confirmed = functools.partial(pool.accepted, slot) if holds else (lambda: None)
            outcome = await session.run(upstream, lost, on_confirmed)
        finally:
            forget()
            forget_heard()
            lost.cancel()
            if not holds:
                pool.attached(attach, -1)
            if holds and outcome != "refused":
                let_go()
        if session.replica_lost:
            gateway.routes.check_soon(endpoint_id)
        if outcome != "refused":
            if attach:
                pool.detached(attach)
            return
        refused = session.refused or {}
        if holds:
            placed.clear()
            pool.refused(slot, as_int(refused.get("max_sessions")), active=session.active, client=waiter.client)
            await note_capacity(gateway, slot)
        avoid.add(slot.id)
        pinned = None


def _refuse(client: Leg, path: str, full: PoolFull) -> None:
    """Every slot stayed taken: refuse as a server at capacity does, with the pool's numbers."""
    if path == "mcp":
        refusal = rpc_capacity_error(None, full.message, full.sessions, full.capacity, full.limit)
    else:
        refusal = capacity_frame(full.message, full.sessions, full.capacity, full.limit)
    client.write(frame(TEXT, json.dumps(refusal).encode(), masked=False))
    client.close(1000, "")
