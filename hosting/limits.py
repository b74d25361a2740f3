"""How much runs: endpoints and their replicas (servers), across the server and per owner, counted under one
lock with every envhub instance."""

from dataclasses import dataclass

from sqlalchemy import ColumnElement, func, select
from sqlmodel import Session, col

from core.errors import TooManyRequestsError
from hosting.models import ACTIVE, LIVE, Endpoint, Replica

__all__ = ["LIMITS_LOCK", "EndpointLimits", "ensure_room", "ensure_servers"]

LIMITS_LOCK = 0x656E76687563  # the advisory lock (core.db.exclusive) under which launches count endpoints


@dataclass(frozen=True)
class EndpointLimits:
    total: int = 20
    per_owner: int = 5  # endpoints nobody owns (anonymous launches) share one such allowance
    idle_timeout_s: float = 1800
    play_idle_s: float = 300  # an endpoint launched from the Play tab, which a tab left playing keeps awake
    servers: int = 64  # replicas of all endpoints together
    servers_per_owner: int = 32
    pool_idle_s: float = 300  # a pool shrinks by replicas without sessions this long
    queue: int = 512  # sessions that may wait for a slot in one pool
    queue_per_client: int = 128  # of those, one client's
    held_per_client: int = 0  # sessions one client may hold on one public endpoint; 0: no cap


def _owned_by(owner: str | None) -> ColumnElement[bool]:
    return col(Endpoint.owner).is_(None) if owner is None else col(Endpoint.owner) == owner


def ensure_room(session: Session, limits: EndpointLimits, owner: str | None, servers: int) -> None:
    """Refuse a launch (of `servers` replicas to begin with) that would pass a limit: run it in the session that
    records the endpoint, under LIMITS_LOCK."""
    active = select(func.count()).select_from(Endpoint).where(col(Endpoint.status).in_(ACTIVE))
    if session.execute(active).scalar_one() >= limits.total:
        raise TooManyRequestsError(
            f"this server runs at most {limits.total} endpoints; stop one first", code="endpoints_limit"
        )
    if session.execute(active.where(_owned_by(owner))).scalar_one() >= limits.per_owner:
        raise TooManyRequestsError(
            f"you have {limits.per_owner} endpoints running, the most allowed; "
            "stop one with DELETE /api/endpoints/{id}",
            code="owner_endpoints_limit",
        )
    ensure_servers(session, limits, owner, servers)


def ensure_servers(session: Session, limits: EndpointLimits, owner: str | None, more: int) -> None:
    """Refuse `more` replicas that would pass the limits on servers (all endpoints' replicas together)."""
    live = (
        select(func.count())
        .select_from(Replica)
        .join(Endpoint, col(Endpoint.id) == col(Replica.endpoint))
        .where(col(Replica.status).in_(LIVE))
    )
    running = session.execute(live).scalar_one()
    if running + more > limits.servers:
        raise TooManyRequestsError(
            f"this server runs at most {limits.servers} servers (replicas of all endpoints) and {running} run; "
            "ask for fewer replicas or stop an endpoint",
            code="servers_limit",
        )
    mine = session.execute(live.where(_owned_by(owner))).scalar_one()
    if mine + more > limits.servers_per_owner:
        raise TooManyRequestsError(
            f"your endpoints may run at most {limits.servers_per_owner} servers (replicas) together and {mine} run; "
            "ask for fewer replicas or stop an endpoint",
            code="owner_servers_limit",
        )
