"""WebSocket sessions through the gateway: each placed on a replica of its endpoint's pool, then relayed.

Each new session is placed as every door's is (gateway.placement): on the replica with the most free slots, moved
to another, unseen by the client, when its server refuses it at capacity before answering anything, and waiting
for a slot when every one is taken (envhub its peer meanwhile: gateway.relay). A socket that attaches to an MCP
session made over HTTP reaches the replica that holds it. A session whose replica dies or hangs is closed with 1011
and a reason saying it was lost; a dead endpoint answers at once with 1011, an unknown one with 1008.
"""

import functools
import json
from collections.abc import Mapping
from urllib.parse import parse_qs

from gateway.gate import admit, client_of, origin_refusal
from gateway.legs import HandshakeError, Leg, open_upstream
from gateway.paths import inner_path, session_path
from gateway.placement import Placement, Refused, Unreachable
from gateway.pools import Pool
from gateway.proxy import as_int, watch_loss
from gateway.relay import Session
from gateway.slots import PoolFull, Slot
from gateway.wire import TEXT, frame
from gateway.wiring import Down, Gateway
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
    traffic = gateway.traffic.of(endpoint_id)
    session = Session(endpoint_id, client, traffic, gateway.settings.ws_ping_s, timers=gateway.timers)
    client_id = client_of(headers, peer, user, gateway.settings.behind_proxy)
    try:
        await _run_session(gateway, found, inside, query, session, client_id)
    finally:
        session.end()


async def _run_session(gateway: Gateway, pool: Pool, path: str, query: str, session: Session, client: str) -> None:
    """Place the session on a replica, moving it while replicas refuse, then relay it until either side ends."""
    attach = (parse_qs(query).get("session_id") or [""])[0]  # the MCP session a socket attaches to, if any
    pinned = pool.pinned_slot(attach) if attach else None
    placement = Placement(gateway, pool, client, active=session.active)
    placed: list[Slot] = []  # the slot the session holds now, once it holds one

    def became_active() -> None:  # an active session is load: it may grow the pool, an idle socket may not
        if pinned is not None and not placed:
            pool.work(attach)  # the MCP session it attaches to works now
        placement.activate(placed[0] if placed else None, nudge=pinned is None)

    session.on_active = became_active
    avoid: frozenset[str] = frozenset()
    try:
        if pinned is not None:  # the MCP session it attaches to holds the slot
            try:
                await _relay(gateway, placement, pinned, False, path, query, session, attach)
                return
            except Refused:
                avoid, pinned = frozenset({pinned.id}), None
            except Unreachable as exc:
                placement.unreachable(pinned, held=False)
                session.client.close(1011, exc.why)
                return

        async def attempt(slot: Slot) -> None:
            placed[:] = [slot]
            try:
                await _relay(gateway, placement, slot, True, path, query, session, attach)
            finally:
                placed.clear()

        try:
            taken = await placement.place(session.client.gone, attempt, avoid)
        except PoolFull as full:
            _refuse(session.client, path, full)
            return
        except Unreachable as exc:
            session.client.close(1011, exc.why)
            return
        if taken is not None:
            placement.release(taken[0])
    except HandshakeError as exc:  # it answered, and refused: every replica of the endpoint serves the same app
        placement.traffic.request(failed=True)
        session.client.close(
            1011, f"the environment's server refused the WebSocket (HTTP {exc.status}): it serves no /{path}"
        )


async def _relay(
    gateway: Gateway,
    placement: Placement,
    slot: Slot,
    holds: bool,
    path: str,
    query: str,
    session: Session,
    attach: str,
) -> None:
    """Relay the session through the slot's replica (`holds`: the session holds the slot, else the MCP session it
    attaches to does) until either side ends. Refused when the server refused it at capacity before answering
    anything; Unreachable when it did not take the socket; HandshakeError when it refused the socket (HTTP 4xx)."""
    pool = placement.pool
    try:
        upstream = await open_upstream(
            slot.upstream.url, path, query, slot.upstream.headers, _CONNECT_S, gateway.timers.now
        )
    except (OSError, HandshakeError, TimeoutError) as exc:  # closed: not listening yet
        if isinstance(exc, HandshakeError) and exc.status is not None and exc.status < 500:
            raise
        status = f" (HTTP {exc.status})" if isinstance(exc, HandshakeError) and exc.status else ""
        raise Unreachable(f"endpoint {placement.endpoint_id} is not answering{status}", retry=holds) from exc
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
        on_confirmed = functools.partial(placement.accepted, slot) if holds else (lambda: None)
        outcome = await session.run(upstream, lost, on_confirmed)
    finally:
        forget()
        forget_heard()
        lost.cancel()
        if not holds:
            pool.attached(attach, -1)
    if session.replica_lost:
        gateway.routes.check_soon(placement.endpoint_id)
    if outcome == "refused":
        raise Refused(as_int((session.refused or {}).get("max_sessions")))
    if attach:
        pool.detached(attach)


def _refuse(client: Leg, path: str, full: PoolFull) -> None:
    """Every slot stayed taken: refuse as a server at capacity does, with the pool's numbers."""
    if path == "mcp":
        refusal = rpc_capacity_error(None, full.message, full.sessions, full.capacity, full.facts)
    else:
        refusal = capacity_frame(full.message, full.sessions, full.capacity, full.facts)
    client.write(frame(TEXT, json.dumps(refusal).encode(), masked=False))
    client.close(1000, "")
