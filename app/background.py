"""The loops a serving envhub runs: the endpoint watch, the replicas' liveness, the background sync, health
rounds, idle play sessions.

All of them run through one helper, `periodically`: a job, then a pause (jittered, so
that instances started together drift apart), again and again; a job that fails is
logged and the loop goes on.
"""

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable

from sqlmodel import Session

from catalog.models import SyncRunPublic
from catalog.store import count_listed
from catalog.sync import Syncer, list_sync_runs
from core.errors import ConflictError
from hosting.monitor import HealthMonitor
from hosting.reconcile import Keeper

__all__ = [
    "EVALUATIONS_INTERVAL_S",
    "SYNC_LEASE",
    "WATCH_INTERVAL_S",
    "health_round",
    "periodically",
    "probe_replicas",
    "sync_if_due",
    "watch_endpoints",
]

log = logging.getLogger("envhub")

WATCH_INTERVAL_S = 2
EVALUATIONS_INTERVAL_S = 30  # how often runs left by envhub processes that are gone are marked interrupted
SYNC_LEASE = "sync"  # held by the one instance that runs the background sync


async def periodically(
    what: str, job: Callable[[], Awaitable[None]], interval_s: float, *, jitter: float = 0, first_after_s: float = 0
) -> None:
    """Run job every interval_s (times a random factor within ±jitter) until cancelled, the first time after
    first_after_s."""
    await asyncio.sleep(first_after_s)
    while True:
        try:
            await job()
        except Exception:  # one failed round must not end the loop
            log.exception("%s failed", what)
        await asyncio.sleep(interval_s * random.uniform(1 - jitter, 1 + jitter))


def watch_endpoints(keeper: Keeper) -> Callable[[], Awaitable[None]]:
    async def watch() -> None:
        await asyncio.to_thread(keeper.watch)

    return watch


def probe_replicas(keeper: Keeper) -> Callable[[], Awaitable[None]]:
    async def probe() -> None:
        await asyncio.to_thread(keeper.scaler.probe)

    return probe


def sync_if_due(syncer: Syncer, interval_s: float) -> Callable[[], Awaitable[None]]:
    """On the instance holding the sync lease: a sync whenever the catalog's last one is `interval_s` old."""

    said_last = False  # a restart says once that the last sync (not due again yet) failed

    async def sync() -> None:
        nonlocal said_last
        if not await asyncio.to_thread(syncer.leases.acquire, SYNC_LEASE):
            return
        if not await asyncio.to_thread(syncer.due, interval_s):
            if not said_last:
                said_last = True
                last = await asyncio.to_thread(_last_run, syncer)
                if last is not None and last.error:
                    await _warn_failed(syncer, last, f"at {last.started_at:%Y-%m-%d %H:%M} UTC ")
            return
        said_last = True
        try:
            run = await asyncio.to_thread(syncer.run)
        except ConflictError:
            return  # a sync asked for through the API is running; this round is covered
        if run.error:
            await _warn_failed(syncer, run)
        else:
            log.info(run.summary())

    return sync


async def _warn_failed(syncer: Syncer, run: SyncRunPublic, when: str = "") -> None:
    listed = await asyncio.to_thread(_count_listed, syncer)
    plural = "" if listed == 1 else "s"
    log.warning("Hub sync %sfailed; serving the %d environment%s in the catalog. %s", when, listed, plural, run.error)


def _last_run(syncer: Syncer) -> SyncRunPublic | None:
    with Session(syncer.engine) as session:
        runs = list_sync_runs(session, limit=1)
    return runs[0] if runs else None


def health_round(monitor: HealthMonitor) -> Callable[[], Awaitable[None]]:
    async def probe_all() -> None:
        done = await monitor.run_round()
        log.info("health: %d probed in %.1f s %s", done.probed, done.seconds, done.statuses)

    return probe_all


def _count_listed(syncer: Syncer) -> int:
    with Session(syncer.engine) as session:
        return count_listed(session)
