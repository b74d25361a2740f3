"""How many endpoints run: across the server, and per owner, counted under one lock with every replica."""

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlmodel import Session, col

from core.errors import TooManyRequestsError
from hosting.models import ACTIVE, Endpoint

__all__ = ["LIMITS_LOCK", "EndpointLimits", "ensure_room"]

LIMITS_LOCK = 0x656E76687563  # the advisory lock (core.db.exclusive) under which launches count endpoints


@dataclass(frozen=True)
class EndpointLimits:
    total: int = 20
    per_owner: int = 5  # endpoints nobody owns (anonymous launches) share one such allowance
    idle_timeout_s: float = 1800


def ensure_room(session: Session, limits: EndpointLimits, owner: str | None) -> None:
    """Refuse a launch that would pass a limit: run it in the session that records the endpoint, under LIMITS_LOCK."""
    active = select(func.count()).select_from(Endpoint).where(col(Endpoint.status).in_(ACTIVE))
    if session.execute(active).scalar_one() >= limits.total:
        raise TooManyRequestsError(f"this server runs at most {limits.total} endpoints; stop one first")
    mine = active.where(col(Endpoint.owner).is_(None) if owner is None else col(Endpoint.owner) == owner)
    if session.execute(mine).scalar_one() >= limits.per_owner:
        raise TooManyRequestsError(
            f"you have {limits.per_owner} endpoints running, the most allowed; "
            "stop one with DELETE /api/endpoints/{id}"
        )
