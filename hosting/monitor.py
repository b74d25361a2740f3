"""The health monitor: keeps each endpoint's status, latency and cached interface true, and runs the rounds.

A round probes every running endpoint this envhub manages, and (through catalog.space_health) every Hub Space
and every environment registered by URL, with bounded concurrency. With several envhub instances on one
database, each probes the endpoints it manages, and only the holder of the health lease probes the
environments, so nothing is probed twice a round.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlmodel import Session

from catalog.health import record
from catalog.hub import Hub
from catalog.models import Environment, Health, HealthRecord
from catalog.space_health import SpaceHealth, probe_with
from catalog.store import cache_interface
from core.leases import Leases
from core.outbound import OutboundGuard
from envclient.health import HealthStatus
from envclient.interface import Interface
from hosting.endpoints import EndpointManager
from hosting.models import Endpoint, EndpointStatus

log = logging.getLogger(__name__)

HEALTH_LEASE = "health"  # held by the one instance whose rounds probe the environments


@dataclass
class Round:
    """What one monitor round did."""

    probed: int = 0
    seconds: float = 0
    statuses: dict[str, int] = field(default_factory=dict)


class HealthMonitor:
    def __init__(
        self,
        engine: Engine,
        hub: Hub,
        endpoints: EndpointManager,
        leases: Leases,
        guard: OutboundGuard,
        *,
        concurrency: int = 16,
        timeout_s: float = 5,
        hub_token: str | None = None,
    ) -> None:
        self.engine = engine
        self.endpoints = endpoints
        self.leases = leases
        self.spaces = SpaceHealth(engine, hub, guard, timeout_s=timeout_s, hub_token=hub_token)
        self.internal = OutboundGuard(allow_private=True)  # envhub's own endpoints
        self.concurrency = concurrency
        self.timeout_s = timeout_s

    # -- one round

    async def run_round(self) -> Round:
        """Probe every running endpoint, Hub Space and URL environment once."""
        started = time.perf_counter()
        endpoint_ids, environments = await asyncio.to_thread(self._targets)
        limit = asyncio.Semaphore(self.concurrency)
        done = Round()

        async def bounded(job: Callable[[], Awaitable[Health | None]]) -> None:
            async with limit:
                try:
                    health = await job()
                except Exception:  # one bad target must not end the round
                    log.exception("a health probe failed")
                    return
                if health is not None:
                    done.probed += 1
                    done.statuses[health.status.value] = done.statuses.get(health.status.value, 0) + 1

        jobs = [lambda e=e: self.probe_endpoint(e) for e in endpoint_ids]
        jobs += [lambda e=e: self.spaces.probe_environment(e) for e in environments]
        await asyncio.gather(*(bounded(job) for job in jobs))
        done.seconds = round(time.perf_counter() - started, 3)
        return done

    def _targets(self) -> tuple[list[str], list[str]]:
        """This instance's running endpoints (they run on its machine); the environments when it holds the lease."""
        leases = self.leases
        running = [
            e.id
            for e in self.endpoints.list(active_only=True)
            if e.status == EndpointStatus.RUNNING and e.instance == leases.instance
        ]
        if not leases.acquire(HEALTH_LEASE):
            return running, []  # another instance probes the Hub Spaces and URLs
        return running, self.spaces.listed()

    # -- endpoints

    async def probe_endpoint(self, endpoint_id: str) -> Health | None:
        pool = await asyncio.to_thread(self.endpoints.resolve, endpoint_id)
        slot = pool.any_ready() if pool is not None else None
        if slot is None:
            return None
        upstream = slot.upstream
        endpoint, environment = await asyncio.to_thread(self._endpoint_rows, endpoint_id)
        if endpoint is None:
            return None
        stale = self.spaces.stale(environment)
        seen = await probe_with(self.internal, upstream.url, self.timeout_s, stale, upstream.headers)
        cold_start = None
        if endpoint.health is None and seen.status == HealthStatus.UP and endpoint.started_at:
            cold_start = round((endpoint.started_at - endpoint.created_at).total_seconds(), 3)
        health = record(endpoint.health, seen, cold_start_s=cold_start)
        await asyncio.to_thread(self._save_endpoint, endpoint_id, health, environment, seen.interface)
        return health

    def _endpoint_rows(self, endpoint_id: str) -> tuple[Endpoint | None, Environment | None]:
        with Session(self.engine) as session:
            endpoint = session.get(Endpoint, endpoint_id)
            environment = session.get(Environment, endpoint.environment) if endpoint else None
            return endpoint, environment

    def _save_endpoint(
        self, endpoint_id: str, health: HealthRecord, environment: Environment | None, interface: Interface | None
    ) -> None:
        with Session(self.engine) as session:
            endpoint = session.get(Endpoint, endpoint_id)
            if endpoint is None or endpoint.status != EndpointStatus.RUNNING:
                return  # stopped while it was probed
            endpoint.health = health
            session.add(endpoint)
            if (
                environment is not None
                and interface is not None
                and cache_interface(session, environment.id, interface)
            ):
                self.spaces.cached(environment.id)
            session.commit()

    async def aclose(self) -> None:
        await self.spaces.aclose()
