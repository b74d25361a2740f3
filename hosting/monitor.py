"""The health monitor: keeps each endpoint's and environment's status, latency and cached interface true.

A round probes every running endpoint, every Hub Space the Hub reports running and
every environment registered by URL, with bounded concurrency. A probe is `GET /health`
and one reset (HTTP in simulation mode, WebSocket otherwise); when the cached
`/metadata`, `/schema`, MCP tools and Task API splits are missing or old, it reads them
too. A sleeping Space is never sent a request unless a user asks to wake it.

With several replicas on one database, each probes the endpoints it manages, and only the
holder of the health lease probes the environments, so nothing is probed twice a round.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, select
from sqlmodel import Session, col

from catalog.health import record, stage_health
from catalog.hub import Hub, space_credentials
from catalog.models import Environment, Health, HealthRecord, Source
from catalog.space_access import SpaceKeys
from catalog.store import cache_interface, save_health
from core.clock import utcnow
from core.errors import EnvhubError, InvalidInputError, NotFoundError
from core.outbound import OutboundGuard, OutboundSession
from hosting.endpoints import EndpointManager
from hosting.models import Endpoint, EndpointStatus
from protocol.health import HealthStatus, Probe, healthy, probe
from protocol.interface import Interface

log = logging.getLogger(__name__)

CACHE_TTL_S = 6 * 3600  # how long the cached interface of an environment is trusted
WAKE_TIMEOUT_S = 300
WAKE_POLL_S = 2
HEALTH_LEASE = "health"  # held by the one replica whose rounds probe the environments


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
        guard: OutboundGuard,
        *,
        concurrency: int = 16,
        timeout_s: float = 5,
        hub_token: str | None = None,
    ) -> None:
        self.engine = engine
        self.hub = hub
        self.hub_token = hub_token  # asks the Hub for private Spaces' keys, see space_credentials
        self.keys = SpaceKeys(hub.endpoint)
        self.endpoints = endpoints
        self.guard = guard
        self.internal = OutboundGuard(allow_private=True)  # envhub's own endpoints
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self._wakes: dict[str, asyncio.Task[None]] = {}
        self._cached_at: dict[str, float] = {}  # environment id -> when its interface was last read

    def _stale(self, row: Environment | None) -> bool:
        """Whether to read the environment's /metadata, /schema, tools and tasks on this probe."""
        if row is None:
            return False
        cached = self._cached_at.get(row.id)
        return row.env_schema is None or cached is None or time.monotonic() - cached > CACHE_TTL_S

    def _cached(self, environment_id: str) -> None:
        self._cached_at[environment_id] = time.monotonic()

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
        jobs += [lambda e=e: self.probe_environment(e) for e in environments]
        await asyncio.gather(*(bounded(job) for job in jobs))
        done.seconds = round(time.perf_counter() - started, 3)
        return done

    def _targets(self) -> tuple[list[str], list[str]]:
        """This replica's running endpoints (they run on its machine); the environments when it holds the lease."""
        leases = self.endpoints.leases
        running = [
            e.id
            for e in self.endpoints.list(active_only=True)
            if e.status == EndpointStatus.RUNNING and e.replica == leases.replica
        ]
        if not leases.acquire(HEALTH_LEASE):
            return running, []  # another replica probes the Hub Spaces and URLs
        statement = select(col(Environment.id)).where(
            col(Environment.source).in_([Source.HUB, Source.URL]), col(Environment.removed_at).is_(None)
        )
        with Session(self.engine) as session:
            environments = list(session.execute(statement).scalars())
        return running, environments

    def _session(
        self,
        guard: OutboundGuard,
        headers: dict[str, str] | None = None,
        credentials: dict[str, dict[str, str]] | None = None,
    ) -> OutboundSession:
        return OutboundSession(guard, timeout_s=self.timeout_s, headers=headers or {}, credentials=credentials or {})

    async def _probe(
        self,
        base: str,
        guard: OutboundGuard,
        read_cache: bool,
        headers: dict[str, str] | None = None,
        credentials: dict[str, dict[str, str]] | None = None,
    ) -> Probe:
        outbound = self._session(guard, headers, credentials)
        try:
            async with asyncio.timeout(self.timeout_s * 8):
                return await probe(base, outbound, with_interface=read_cache)
        except TimeoutError:
            return Probe(HealthStatus.DOWN, f"the probe took over {self.timeout_s * 8:g} s")
        finally:
            await outbound.aclose()

    # -- endpoints

    async def probe_endpoint(self, endpoint_id: str) -> Health | None:
        pool = await asyncio.to_thread(self.endpoints.routes.resolve, endpoint_id)
        slot = pool.any_ready() if pool is not None else None
        if slot is None:
            return None
        upstream = slot.upstream
        endpoint, environment = await asyncio.to_thread(self._endpoint_rows, endpoint_id)
        if endpoint is None:
            return None
        seen = await self._probe(upstream.url, self.internal, self._stale(environment), upstream.headers)
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
                self._cached(environment.id)
            session.commit()

    # -- environments: Hub Spaces and URLs

    async def probe_environment(self, environment_id: str) -> Health | None:
        row = await asyncio.to_thread(self._environment, environment_id)
        if row is None or row.source not in (Source.HUB, Source.URL):
            return None
        host, stage_seen, updates, credentials = row.host, None, {}, {}
        if row.source == Source.HUB:
            try:
                runtime = await asyncio.to_thread(self.hub.space_runtime, row.id)
            except EnvhubError as exc:
                log.info("health of %s not refreshed: %s", row.id, exc.message)
                return None  # the Hub is unreachable: what is known stays
            if runtime is None:
                stage_seen = Probe(HealthStatus.DOWN, "the Hub no longer has this Space")
            else:
                host = runtime.host or host
                updates = {"runtime_stage": runtime.stage, "host": host}
                stage_seen = stage_health(runtime.stage, runtime.error_message)
                credentials = space_credentials(row.id, runtime, self.hub_token, self.keys)
        if row.id in self._wakes:
            return None  # a wake asked for by a user is following it
        if stage_seen is not None:
            seen = stage_seen
        elif not host:
            seen = Probe(HealthStatus.DOWN, "no host to probe")
        else:
            seen = await self._probe(host, self.guard, self._stale(row), credentials=credentials)
        health = record(row.health, seen)
        await asyncio.to_thread(self._save_environment, row.id, health, seen.interface, updates)
        return health

    async def space_credentials(self, environment_id: str) -> dict[str, dict[str, str]]:
        """For a private Hub Space, the token scoped to its host (asks the Hub where it runs); else nothing."""
        if not self.hub_token:
            return {}
        row = await asyncio.to_thread(self._environment, environment_id)
        if row is None or row.source != Source.HUB:
            return {}
        try:
            runtime = await asyncio.to_thread(self.hub.space_runtime, row.id)
        except EnvhubError as exc:
            log.info("no token for %s: %s", row.id, exc.message)
            return {}
        return space_credentials(row.id, runtime, self.hub_token, self.keys)

    def _environment(self, environment_id: str) -> Environment | None:
        with Session(self.engine) as session:
            return session.get(Environment, environment_id)

    def _save_environment(
        self, environment_id: str, health: HealthRecord, interface: Interface | None, updates: dict[str, Any]
    ) -> None:
        with Session(self.engine) as session:
            if save_health(session, environment_id, health, interface, updates) and interface is not None:
                self._cached(environment_id)
            session.commit()

    # -- waking a sleeping Space, on request

    async def wake(self, environment_id: str) -> Health:
        """Send a sleeping Space the request that wakes it, then follow it until /health answers."""
        row = await asyncio.to_thread(self._environment, environment_id)
        if row is None:
            raise NotFoundError(f"no environment {environment_id!r} in the catalog")
        if row.source not in (Source.HUB, Source.URL) or not row.host:
            raise InvalidInputError(f"{environment_id} runs nowhere to wake; launch it with POST /api/endpoints")
        current = row.health
        if (current is not None and current.status == HealthStatus.UP) or environment_id in self._wakes:
            return current or Health(status=HealthStatus.BUILDING)
        host, updates, credentials = row.host, {}, {}
        if row.source == Source.HUB:
            runtime = await asyncio.to_thread(self.hub.space_runtime, row.id)  # where it runs now
            if runtime is None:
                raise NotFoundError(f"the Hub no longer has the Space {environment_id}")
            host = runtime.host or host
            updates = {"runtime_stage": runtime.stage, "host": host}
            credentials = space_credentials(row.id, runtime, self.hub_token, self.keys)
        waking = Probe(HealthStatus.BUILDING, "waking on request")
        health = record(current, waking).model_copy(update={"waking_since": utcnow()})
        await asyncio.to_thread(self._save_environment, environment_id, health, None, updates)
        task = asyncio.create_task(self._follow_wake(environment_id, host, time.monotonic(), credentials))
        self._wakes[environment_id] = task
        task.add_done_callback(lambda _: self._wakes.pop(environment_id, None))
        return health

    async def _follow_wake(
        self, environment_id: str, host: str, started: float, credentials: dict[str, dict[str, str]]
    ) -> None:
        outbound = self._session(self.guard, credentials=credentials)
        try:
            while time.monotonic() - started < WAKE_TIMEOUT_S:
                try:
                    if healthy(await outbound.fetch("GET", host.rstrip("/") + "/health")):
                        break
                except Exception as exc:  # still asleep, still starting
                    log.debug("%s not awake yet: %s", environment_id, exc)
                await asyncio.sleep(WAKE_POLL_S)
            else:
                await self._finish_wake(environment_id, Probe(HealthStatus.DOWN, "did not wake within 5 minutes"))
                return
            cold_start = round(time.monotonic() - started, 3)
            seen = await self._probe(host, self.guard, True, credentials=credentials)
            await self._finish_wake(environment_id, seen, cold_start)
        finally:
            await outbound.aclose()

    async def _finish_wake(self, environment_id: str, seen: Probe, cold_start_s: float | None = None) -> None:
        row = await asyncio.to_thread(self._environment, environment_id)
        if row is None:
            return
        previous = row.health.model_copy(update={"waking_since": None}) if row.health else None
        health = record(previous, seen, cold_start_s=cold_start_s)
        await asyncio.to_thread(self._save_environment, environment_id, health, seen.interface, {})

    async def aclose(self) -> None:
        for task in list(self._wakes.values()):
            task.cancel()
        await asyncio.gather(*self._wakes.values(), return_exceptions=True)
