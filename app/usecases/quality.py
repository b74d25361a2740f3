"""Quality reports of what runs: what hosting tells a report about an endpoint, and the background rounds that
report on each revision once.

A round finds running endpoints of this instance, then running Hub Spaces the health monitor saw
up, whose environment revision has no quality report filed, and runs a report of up to `per_round` of them, one at
a time. An endpoint's report reaches its server directly (its first ready replica), since a
round has no request to learn this server's own address from; its sessions take their slots from the endpoint's
pool all the same, only ones nobody waits for (gateway.lending). A report that gave way to the endpoint's clients
is skipped for the round, said in the log and the pool's events, and runs in a later one. A target whose report
failed to run is not tried again by this process.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlmodel import Session, col

from catalog.models import Environment, Source
from conformance import ServerCapacity
from conformance.checker import Checker
from conformance.quality import ReplicaTarget
from core.errors import SlotsInUseError
from envclient.health import HealthStatus
from hosting.endpoints import EndpointManager
from hosting.models import Endpoint, EndpointStatus

__all__ = ["hosted", "quality_round", "server_capacity"]

log = logging.getLogger("envhub")

_RUNNING = "RUNNING"  # a Space's runtime stage while it serves


def server_capacity(manager: EndpointManager, endpoint_id: str) -> ServerCapacity:
    """What each server of the endpoint's pool holds, read afresh each time: the most any ready one holds, once every
    ready one has said (the launch's MAX_CONCURRENT_ENVS, or a session it refused, a check's included)."""

    def read() -> int | None:
        pool = manager.known_pool(endpoint_id)
        ready = [s for s in pool.slots.values() if s.accepting] if pool is not None else []
        return max(s.capacity for s in ready) if ready and all(s.said for s in ready) else None

    return read


def hosted(manager: EndpointManager, endpoint: Endpoint) -> dict[str, Any]:
    """What hosting knows of a running endpoint that a quality report uses: its ready replicas (to compare them) and
    the pool's seats its sessions on them take, its cold start, and the memory its servers hold."""
    pool = manager.resolve(endpoint.id)
    slots = sorted((s for s in pool.slots.values() if s.accepting), key=lambda s: s.id) if pool is not None else []
    cold_start = (endpoint.started_at - endpoint.created_at).total_seconds() if endpoint.started_at else None
    return {
        "replicas": tuple(ReplicaTarget(s.id, s.upstream.url, s.upstream.headers) for s in slots),
        "seats": pool.lender if pool is not None else None,
        "server_capacity": server_capacity(manager, endpoint.id),
        "cold_start_s": round(cold_start, 3) if cold_start is not None else None,
        "memory": lambda: manager.resident_bytes(endpoint),
    }


@dataclass(frozen=True)
class _Due:
    environment: str
    revision: str
    url: str
    endpoint: Endpoint | None = None
    replica: str | None = None  # the endpoint's replica the URL reaches


def _due(checker: Checker, manager: EndpointManager, tried: set[tuple[str, str]], limit: int) -> list[_Due]:
    """Up to `limit` revisions with no quality report: this instance's running endpoints first, then Spaces."""
    endpoints = [
        e
        for e in manager.list(active_only=True)
        if e.status == EndpointStatus.RUNNING and e.revision and e.instance == manager.instance
    ]
    statement = (
        select(Environment)
        .where(
            col(Environment.source) == Source.HUB,
            col(Environment.removed_at).is_(None),
            col(Environment.runtime_stage) == _RUNNING,
            col(Environment.host).is_not(None),
            col(Environment.sha).is_not(None),
        )
        .order_by(col(Environment.trending_score).desc(), col(Environment.likes).desc())
        .limit(100)
    )
    with Session(checker.engine) as session:
        spaces = list(session.execute(statement).scalars())
    names = sorted({e.environment for e in endpoints} | {s.id for s in spaces})
    skip = tried | checker.reported_revisions(names)
    due: list[_Due] = []
    for endpoint in endpoints:
        key = (endpoint.environment, str(endpoint.revision))
        slots = hosted(manager, endpoint)["replicas"]
        if key not in skip and slots:
            due.append(_Due(*key, slots[0].url, endpoint, slots[0].id))
            skip.add(key)
    for space in spaces:
        key = (space.id, str(space.sha))
        up = space.health is not None and space.health.status == HealthStatus.UP
        if key not in skip and space.host and up:
            due.append(_Due(*key, space.host))
            skip.add(key)
    return due[:limit]


def quality_round(checker: Checker, manager: EndpointManager, per_round: int) -> Callable[[], Awaitable[None]]:
    tried: set[tuple[str, str]] = set()
    gave_way: set[tuple[str, str]] = set()  # reports skipped in the last round they were due, for the clients

    async def report() -> None:
        for due in await asyncio.to_thread(_due, checker, manager, tried, per_round):
            key = (due.environment, due.revision)
            tried.add(key)
            extra: dict[str, Any] = {}
            if due.endpoint is not None:
                extra = await asyncio.to_thread(hosted, manager, due.endpoint)
                extra |= {
                    "endpoint": due.endpoint.id,
                    "trusted": tuple(r.url for r in extra["replicas"]),
                    "replica": due.replica,
                }
            try:
                filed = await checker.check_quality(
                    due.url, environment=due.environment, revision=due.revision, **extra
                )
            except SlotsInUseError as exc:
                tried.discard(key)  # not a failure to run: a later round runs it
                log.info("quality report of %s@%s skipped for this round: %s", due.environment, due.revision[:12], exc)
                if due.endpoint is not None and key not in gave_way:
                    await asyncio.to_thread(manager.event, due.endpoint.id, "gave_way", exc.message, exc.code)
                gave_way.add(key)
                continue
            gave_way.discard(key)
            log.info("quality report of %s@%s: %s", due.environment, due.revision[:12], filed.verdict)

    return report
