"""Keeping endpoint rows true: the backends are asked what actually runs, at start-up and every few seconds after.

At start-up (reconcile) rows match what runs, and nothing runs that no row claims. Every
watch after tends this envhub's pools (hosting.scaling: replicas that died are replaced,
pools grow and shrink), stops endpoints idle too long, and takes over the endpoints of
envhub instances that are gone (an earlier life of this one, say): their servers that still
run as seen from here (containers, swarm services, Spaces) are adopted, and an endpoint
with none left starts again under its id, so its URL keeps working. Only a stop (on request,
idle, or a failure) ends an endpoint. One envhub instance never stops or fails another live
one's endpoints.
"""

import logging
import threading
from datetime import datetime, timedelta

from core.clock import as_utc, utcnow
from core.errors import EnvhubError
from core.leases import Leases
from hosting import reasons
from hosting.attention import Attention
from hosting.endpoint_store import EndpointStore
from hosting.lifecycle import Lifecycle
from hosting.limits import EndpointLimits
from hosting.models import Backend, Endpoint, EndpointStatus, ReplicaStatus
from hosting.replica_store import ReplicaStore
from hosting.replicas import Replicas
from hosting.runtimes.base import AnyRuntime, handle_of, is_service
from hosting.scaling import Scaler
from hosting.traffic import TrafficBook

__all__ = ["Keeper"]

log = logging.getLogger(__name__)


class Keeper:
    """Keeps one instance's endpoint rows true against what its backends run."""

    def __init__(
        self,
        lifecycle: Lifecycle,
        scaler: Scaler,
        *,
        rows: EndpointStore,
        replicas: ReplicaStore,
        servers: Replicas,
        runtimes: dict[Backend, AnyRuntime],
        traffic: TrafficBook,
        leases: Leases,
        limits: EndpointLimits,
        attention: Attention,
    ) -> None:
        self.lifecycle = lifecycle  # what the keeper decides, the lifecycle does and records
        self.scaler = scaler
        self.rows = rows
        self.replicas = replicas
        self.servers = servers
        self.runtimes = runtimes
        self.traffic = traffic
        self.leases = leases
        self.limits = limits
        self.attention = attention
        self.checked_at: datetime | None = None  # when the last watch finished
        self._attending: threading.Thread | None = None
        self._stopping = threading.Event()
        self._swept_for: set[str] = set()  # the live instances when spares were last swept
        self._checking: set[str] = set()  # endpoints a check_soon is looking at now
        self._lock = threading.Lock()

    @property
    def instance(self) -> str:
        return self.leases.instance

    def start(self) -> None:
        """Tend, from now on, the endpoints the gateway asks about (hosting.attention) as soon as it asks."""
        self._attending = threading.Thread(target=self._attend, name="attention", daemon=True)
        self._attending.start()

    def _attend(self) -> None:
        while not self._stopping.is_set():
            for endpoint_id, check in self.attention.take(timeout_s=1.0).items():
                if check:
                    self.check_soon(endpoint_id)
                else:
                    self.scaler.scale_soon(endpoint_id)

    def reconcile(self) -> None:
        """At start-up: rows match what runs, and nothing runs that no row claims."""
        live = self.leases.live_instances()
        for endpoint in self.rows.list(active_only=True):
            if endpoint.instance not in live:
                self._take_over(endpoint)
        claimed = self._servers()
        for backend, runtime in self.runtimes.items():
            try:
                for orphan in runtime.managed_servers() - claimed:
                    log.warning("removing orphaned %s endpoint %s", backend.value, orphan)
                    runtime.stop_leftover(orphan)
            except EnvhubError as exc:
                log.info("%s backend not checked for leftovers: %s", backend.value, exc.message)
        self._sweep(live)

    def watch(self) -> None:
        """Mark this instance's endpoints that died as failed, stop those idle too long, take over orphans."""
        now = utcnow()
        limits = self.limits
        active = self.rows.list(active_only=True)
        self.traffic.write_activity([e.id for e in active])
        live = self.leases.live_instances()
        for endpoint in active:
            if endpoint.instance not in live:
                self._take_over(endpoint)
                continue
            if endpoint.instance != self.instance or endpoint.status != EndpointStatus.RUNNING:
                continue
            if endpoint.backend not in self.runtimes:
                continue
            self.scaler.tend(endpoint)
            stats = self.traffic.stats(endpoint)
            last = as_utc(stats.last_active_at or endpoint.started_at or now)
            idle = limits.play_idle_s if endpoint.for_play else limits.idle_timeout_s
            if stats.active_sessions == 0 and now - last > timedelta(seconds=idle):
                spent = f"{idle:g} seconds" if idle < 120 else f"{idle / 60:g} minutes"
                self.lifecycle.end(endpoint.id, f"stopped after {spent} without sessions", reasons.IDLE_STOPPED)
        self._stop_unclaimed()
        self._sweep(live)
        self.checked_at = utcnow()

    def check_soon(self, endpoint_id: str) -> None:
        """The gateway saw a replica fail to answer: find out now whether it died. A flood of failures while one
        check runs asks for nothing more: one thread per endpoint at most."""
        with self._lock:
            if endpoint_id in self._checking:
                return
            self._checking.add(endpoint_id)
        threading.Thread(target=self._check, args=(endpoint_id,), name=f"check-{endpoint_id}", daemon=True).start()

    def _check(self, endpoint_id: str) -> None:
        try:
            endpoint = self.rows.find(endpoint_id)
            if endpoint is None or endpoint.instance != self.instance or endpoint.status != EndpointStatus.RUNNING:
                return  # its own envhub instance watches it
            if endpoint.backend in self.runtimes:
                self.scaler.tend(endpoint)
        finally:
            with self._lock:
                self._checking.discard(endpoint_id)

    def shutdown(self) -> None:
        """Stop this instance's local processes with it (their endpoints start again with the next start);
        containers, services and Spaces run on and are adopted again then."""
        try:
            self._stopping.set()
            self.attention.close()
            if self._attending is not None:
                self._attending.join()
            self.lifecycle.close()
            self._stop_unclaimed()  # and those whose rows another instance stopped or took over
        finally:
            self.scaler.close()
            for runtime in self.runtimes.values():
                runtime.close()  # the process backend's stops whatever server a launch under way started

    def _take_over(self, endpoint: Endpoint) -> None:
        """An endpoint whose instance is gone: keep it when it still runs as seen from here, else stop it."""
        if not self.rows.take_over(endpoint, self.instance):
            return  # another instance took it first
        try:
            if self._still_runs(endpoint):
                log.info("endpoint %s of instance %s is now managed here", endpoint.id, endpoint.instance)
                if endpoint.status == EndpointStatus.STARTING:  # its launch was cut short once its servers ran
                    self.lifecycle.resume(endpoint.id)
                return
        except EnvhubError as exc:
            log.warning("could not check endpoint %s: %s", endpoint.id, exc.message)
        gone = f" (its instance {endpoint.instance} is gone)" if endpoint.instance else ""
        try:
            self.lifecycle.restart(endpoint, f"envhub restarted{gone}")
        except EnvhubError as exc:
            log.warning("could not start endpoint %s again: %s", endpoint.id, exc.message)

    def _still_runs(self, endpoint: Endpoint) -> bool:
        """Whether some of a taken-over endpoint's servers run as seen from here; those that do not (or had not
        started yet) are stopped."""
        if endpoint.handle:  # a service
            runtime = self.runtimes.get(endpoint.backend)
            service = handle_of(runtime, endpoint.handle) if runtime is not None else None
            return runtime is not None and service is not None and runtime.is_running(service)
        running = False
        for replica in self.replicas.rows(endpoint.id):
            if replica.status != ReplicaStatus.STARTING and self.servers.is_running(endpoint, replica):
                running = True
            else:
                gone = "its envhub instance is gone"
                self.lifecycle.stop_replica(endpoint, replica, status=ReplicaStatus.STOPPED, error=gone)
        return running

    def _stop_unclaimed(self) -> None:
        """Local servers whose rows another instance stopped: it could not reach this machine's processes."""
        runtime = self.runtimes.get(Backend.PROCESS)
        if runtime is None:
            return
        for orphan in runtime.managed_servers() - self._servers(mine_only=True):
            runtime.stop_leftover(orphan)

    def _servers(self, *, mine_only: bool = False) -> set[str]:
        """The servers active endpoints' rows claim: each live replica's, and each service's."""
        servers: set[str] = set()
        for endpoint in self.rows.list(active_only=True):
            if mine_only and endpoint.instance != self.instance:
                continue
            runtime = self.runtimes.get(endpoint.backend)
            if endpoint.handle or (runtime is not None and is_service(runtime)):  # a service, or one starting
                servers.add(endpoint.id)
            servers |= {r.id for r in self.replicas.rows(endpoint.id)}
        return servers

    def _sweep(self, live: set[str]) -> None:
        """Remove what instances that are gone started ahead of launches, once per change of who is alive."""
        if live == self._swept_for:
            return
        self._swept_for = live
        for backend, runtime in self.runtimes.items():
            try:
                runtime.sweep(live)
            except EnvhubError as exc:
                log.debug("%s backend not swept: %s", backend.value, exc.message)
