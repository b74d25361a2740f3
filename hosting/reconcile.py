"""Keeping endpoint rows true: the backends are asked what actually runs, at start-up and every few seconds after.

At start-up (reconcile) rows match what runs, and nothing runs that no row claims. Every
watch after marks this replica's endpoints that died as failed (saying how), stops those
idle too long, and takes over the endpoints of replicas that are gone: kept when they
still run as seen from here (containers, Spaces), stopped otherwise. One replica never
stops or fails another live replica's endpoints.
"""

import logging
import threading
from datetime import timedelta
from pathlib import Path

from sqlalchemy import ColumnElement, update
from sqlmodel import Session, col

from core.clock import as_utc, utcnow
from core.errors import EnvhubError
from hosting.endpoints import EndpointManager
from hosting.models import Backend, Endpoint, EndpointStatus
from hosting.runtimes.logs import death_note

__all__ = ["Keeper"]

log = logging.getLogger(__name__)


class Keeper:
    """Keeps one replica's endpoint rows true against what its backends run."""

    def __init__(self, endpoints: EndpointManager) -> None:
        self.endpoints = endpoints
        self._swept_for: set[str] = set()  # the live replicas when spares were last swept

    @property
    def replica(self) -> str:
        return self.endpoints.leases.replica

    def reconcile(self) -> None:
        """At start-up: rows match what runs, and nothing runs that no row claims."""
        live = self.endpoints.leases.live_replicas()
        for endpoint in self.endpoints.list(active_only=True):
            if endpoint.replica not in live:
                self._take_over(endpoint)
        claimed = {e.id for e in self.endpoints.list(active_only=True)}
        for backend, runtime in self.endpoints.runtimes.items():
            try:
                for orphan in runtime.managed_servers() - claimed:
                    log.warning("removing orphaned %s endpoint %s", backend.value, orphan)
                    runtime.stop_leftover(orphan)
            except EnvhubError as exc:
                log.info("%s backend not checked for leftovers: %s", backend.value, exc.message)
        self._sweep(live)

    def watch(self) -> None:
        """Mark this replica's endpoints that died as failed, stop those idle too long, take over orphans."""
        now = utcnow()
        limits = self.endpoints.limits
        active = self.endpoints.list(active_only=True)
        self.endpoints.traffic.write_activity([e.id for e in active])
        live = self.endpoints.leases.live_replicas()
        for endpoint in active:
            if endpoint.replica not in live:
                self._take_over(endpoint)
                continue
            if endpoint.replica != self.replica or endpoint.status != EndpointStatus.RUNNING:
                continue
            runtime = self.endpoints.runtimes.get(endpoint.backend)
            handle = self.endpoints.handle(endpoint)
            if runtime is None or handle is None:
                continue
            if not runtime.is_running(handle):
                self.endpoints.fail(endpoint, _death_note(endpoint))
                continue
            stats = self.endpoints.traffic.stats(endpoint)
            last = as_utc(stats.last_active_at or endpoint.started_at or now)
            if stats.active_sessions == 0 and now - last > timedelta(seconds=limits.idle_timeout_s):
                idle = limits.idle_timeout_s
                spent = f"{idle:g} seconds" if idle < 120 else f"{idle / 60:g} minutes"
                self.endpoints.end(endpoint.id, f"stopped after {spent} without sessions")
        self._stop_unclaimed()
        self._sweep(live)

    def check_soon(self, endpoint_id: str) -> None:
        """The gateway saw an endpoint fail to answer: find out now whether it died."""
        self.endpoints.routes.forget(endpoint_id)
        threading.Thread(target=self._check, args=(endpoint_id,), daemon=True).start()

    def _check(self, endpoint_id: str) -> None:
        endpoint = self.endpoints.get(endpoint_id)
        if endpoint.replica != self.replica or endpoint.status != EndpointStatus.RUNNING:
            return  # its own replica watches it
        runtime = self.endpoints.runtimes.get(endpoint.backend)
        handle = self.endpoints.handle(endpoint)
        if runtime is not None and handle is not None and not runtime.is_running(handle):
            self.endpoints.fail(endpoint, _death_note(endpoint))

    def shutdown(self) -> None:
        """Stop this replica's local processes with it; containers and Spaces are reconciled on the next start."""
        try:
            for endpoint in self.endpoints.list(active_only=True):
                if endpoint.backend == Backend.PROCESS and endpoint.replica == self.replica:
                    self.endpoints.end(endpoint.id, "envhub stopped")
            self._stop_unclaimed()  # and those whose rows another replica stopped or took over
        finally:
            for runtime in self.endpoints.runtimes.values():
                runtime.close()

    def _take_over(self, endpoint: Endpoint) -> None:
        """An endpoint whose replica is gone: keep it when it still runs as seen from here, else stop it."""
        with Session(self.endpoints.engine) as session, session.begin():
            claimed = session.execute(
                update(Endpoint)
                .where(col(Endpoint.id) == endpoint.id, _same_replica(endpoint.replica))
                .values(replica=self.replica)
                .returning(col(Endpoint.id))
            ).first()
        if claimed is None:
            return  # another replica took it first
        runtime = self.endpoints.runtimes.get(endpoint.backend)
        handle = self.endpoints.handle(endpoint)
        try:
            running = endpoint.status == EndpointStatus.RUNNING
            if runtime is not None and handle is not None and running and runtime.is_running(handle):
                log.info("endpoint %s of replica %s is now managed here", endpoint.id, endpoint.replica)
                return
            if runtime is not None and handle is not None:
                runtime.stop(handle)
        except EnvhubError as exc:
            log.warning("could not check endpoint %s: %s", endpoint.id, exc.message)
        gone = f" (its replica {endpoint.replica} is gone)" if endpoint.replica else ""
        self.endpoints.routes.forget(endpoint.id)
        self.endpoints.update(
            endpoint.id,
            status=EndpointStatus.STOPPED,
            message=f"envhub restarted while it ran{gone}; launch it again",
            stopped_at=utcnow(),
        )

    def _stop_unclaimed(self) -> None:
        """Local servers whose rows another replica stopped: it could not reach this machine's processes."""
        runtime = self.endpoints.runtimes.get(Backend.PROCESS)
        if runtime is None:
            return
        mine = {e.id for e in self.endpoints.list(active_only=True) if e.replica == self.replica}
        for orphan in runtime.managed_servers() - mine:
            runtime.stop_leftover(orphan)

    def _sweep(self, live: set[str]) -> None:
        """Remove what replicas that are gone started ahead of launches, once per change of who is alive."""
        if live == self._swept_for:
            return
        self._swept_for = live
        for backend, runtime in self.endpoints.runtimes.items():
            try:
                runtime.sweep(live)
            except EnvhubError as exc:
                log.debug("%s backend not swept: %s", backend.value, exc.message)


def _death_note(endpoint: Endpoint) -> str:
    return death_note(Path(endpoint.log_path) if endpoint.log_path else None)


def _same_replica(replica: str | None) -> ColumnElement[bool]:
    column = col(Endpoint.replica)
    return column.is_(None) if replica is None else column == replica
