"""The health of what the catalog lists that runs elsewhere: Hub Spaces and environments registered by URL.

A probe is `GET /health` and one reset (HTTP in simulation mode, WebSocket otherwise), and reads the cached
`/metadata`, `/schema`, MCP tools and Task API splits when they are missing or old. A Space the Hub reports
asleep, building or broken is recorded as such without a request to it; a sleeping Space is sent one only when a
user asks to wake it. A private Space's host gets its own short-lived key (catalog.space_access), nothing else.
"""

import asyncio
import logging
import time
from datetime import UTC
from typing import Any

from sqlalchemy import Engine, select
from sqlmodel import Session, col

from catalog.health import record, stage_health
from catalog.hub import Hub, space_credentials
from catalog.models import Environment, Health, HealthRecord, Source
from catalog.space_access import SpaceKeys
from catalog.store import save_health
from core.clock import utcnow
from core.errors import EnvhubError, InvalidInputError, NotFoundError
from core.outbound import OutboundGuard, OutboundSession
from envclient.health import HealthStatus, Probe, healthy, probe
from envclient.interface import Interface

__all__ = ["CACHE_TTL_S", "WAKING", "SpaceHealth", "is_waking", "probe_with"]

log = logging.getLogger(__name__)

CACHE_TTL_S = 6 * 3600  # how long the cached interface of an environment is trusted
WAKE_TIMEOUT_S = 300
WAKE_POLL_S = 2
WAKING = "waking on request"  # the health message while a wake is followed
# The stable codes beside this module's health messages (a health row's `reason`).
WAKING_REASON = "waking"
PROBE_TIMEOUT = "probe_timeout"
SPACE_GONE = "space_gone"  # the Hub no longer has the Space
NO_HOST = "no_host"
WAKE_TIMEOUT = "wake_timeout"


def is_waking(health: Health | None) -> bool:
    """A user asked the Space to wake and /health has not answered yet: a wake is followed for WAKE_TIMEOUT_S at
    most, so one whose follower went with its envhub (a restart mid-wake) stops showing once a probe sees the Space
    otherwise, or once that time has passed."""
    if health is None or health.waking_since is None or health.status != HealthStatus.BUILDING:
        return False
    since = health.waking_since if health.waking_since.tzinfo else health.waking_since.replace(tzinfo=UTC)
    return (utcnow() - since).total_seconds() < WAKE_TIMEOUT_S


async def probe_with(
    guard: OutboundGuard,
    base: str,
    timeout_s: float,
    read_cache: bool,
    headers: dict[str, str] | None = None,
    credentials: dict[str, dict[str, str]] | None = None,
) -> Probe:
    """One probe of a server through the guard, bounded as a whole by eight of its requests' timeouts."""
    outbound = OutboundSession(guard, timeout_s=timeout_s, headers=headers or {}, credentials=credentials or {})
    try:
        async with asyncio.timeout(timeout_s * 8):
            return await probe(base, outbound, with_interface=read_cache)
    except TimeoutError:
        return Probe(HealthStatus.DOWN, f"the probe took over {timeout_s * 8:g} s", PROBE_TIMEOUT)
    finally:
        await outbound.aclose()


class SpaceHealth:
    """Probes Hub Spaces and URL environments, wakes a sleeping Space on request, and keeps when each
    environment's interface was last read (an endpoint's probe reads it too)."""

    def __init__(
        self, engine: Engine, hub: Hub, guard: OutboundGuard, *, timeout_s: float = 5, hub_token: str | None = None
    ) -> None:
        self.engine = engine
        self.hub = hub
        self.guard = guard
        self.timeout_s = timeout_s
        self.hub_token = hub_token  # asks the Hub for private Spaces' keys, see space_credentials
        self.keys = SpaceKeys(hub.endpoint)
        self._wakes: dict[str, asyncio.Task[None]] = {}
        self._cached_at: dict[str, float] = {}  # environment id -> when its interface was last read

    def stale(self, row: Environment | None) -> bool:
        """Whether to read the environment's /metadata, /schema, tools and tasks on this probe."""
        if row is None:
            return False
        cached = self._cached_at.get(row.id)
        return row.env_schema is None or cached is None or time.monotonic() - cached > CACHE_TTL_S

    def cached(self, environment_id: str) -> None:
        self._cached_at[environment_id] = time.monotonic()

    def listed(self) -> list[str]:
        """The environments a round probes: Hub Spaces and URLs still in the catalog."""
        statement = select(col(Environment.id)).where(
            col(Environment.source).in_([Source.HUB, Source.URL]), col(Environment.removed_at).is_(None)
        )
        with Session(self.engine) as session:
            return list(session.execute(statement).scalars())

    async def _probe(
        self, base: str, guard: OutboundGuard, read_cache: bool, credentials: dict[str, dict[str, str]] | None = None
    ) -> Probe:
        return await probe_with(guard, base, self.timeout_s, read_cache, credentials=credentials)

    def _session(self, guard: OutboundGuard, credentials: dict[str, dict[str, str]]) -> OutboundSession:
        return OutboundSession(guard, timeout_s=self.timeout_s, credentials=credentials)

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
                stage_seen = Probe(HealthStatus.DOWN, "the Hub no longer has this Space", SPACE_GONE)
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
            seen = Probe(HealthStatus.DOWN, "no host to probe", NO_HOST)
        else:
            seen = await self._probe(host, self.guard, self.stale(row), credentials=credentials)
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
                self.cached(environment_id)
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
        waking = Probe(HealthStatus.BUILDING, WAKING, WAKING_REASON)
        health = record(current, waking).model_copy(update={"waking_since": utcnow()})
        await asyncio.to_thread(self._save_environment, environment_id, health, None, updates)
        task = asyncio.create_task(self._follow_wake(environment_id, host, time.monotonic(), credentials))
        self._wakes[environment_id] = task
        task.add_done_callback(lambda _: self._wakes.pop(environment_id, None))
        return health

    async def _follow_wake(
        self, environment_id: str, host: str, started: float, credentials: dict[str, dict[str, str]]
    ) -> None:
        outbound = self._session(self.guard, credentials)
        try:
            while time.monotonic() - started < WAKE_TIMEOUT_S:
                try:
                    if healthy(await outbound.fetch("GET", host.rstrip("/") + "/health")):
                        break
                except Exception as exc:  # still asleep, still starting
                    log.debug("%s not awake yet: %s", environment_id, exc)
                await asyncio.sleep(WAKE_POLL_S)
            else:
                await self._finish_wake(
                    environment_id, Probe(HealthStatus.DOWN, "did not wake within 5 minutes", WAKE_TIMEOUT)
                )
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
