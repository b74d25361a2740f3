"""Hosted endpoints' lifecycle: the one writer of endpoint and replica status, and of the pool cache's refreshes.

A launch the launcher prepared (hosting.launcher) is recorded here, starting, and its servers start in the
background; the row says `starting`, then `running` or why it failed. The scaler and the keeper
(hosting.scaling, hosting.reconcile) decide when pools grow, shrink, lose a replica or start again, and ask
this to do it, so that what a row says and where the gateway reaches agree.
"""

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from catalog.revisions import note_image
from core.clock import utcnow
from core.errors import EnvhubError, LaunchError
from gateway.pools import Pool
from hosting import reasons
from hosting.endpoint_store import EndpointStore
from hosting.launcher import Launcher
from hosting.models import ACTIVE, Backend, Endpoint, EndpointStatus, Replica, ReplicaStatus
from hosting.options import ReplicaRange
from hosting.pool_cache import PoolCache
from hosting.replica_store import ReplicaStore, capacity_of
from hosting.replicas import Replicas
from hosting.runtimes.base import AnyRuntime, LaunchSpec, Task, handle_of, is_service
from hosting.traffic import TrafficBook

__all__ = ["Lifecycle"]

log = logging.getLogger(__name__)


class Lifecycle:
    """Starts, grows, heals and stops the endpoints one envhub instance manages, and records each step."""

    def __init__(
        self,
        engine: Engine,
        runtimes: dict[Backend, AnyRuntime],
        launcher: Launcher,
        store: EndpointStore,
        replica_store: ReplicaStore,
        servers: Replicas,
        pools: PoolCache,
        traffic: TrafficBook,
    ) -> None:
        self.engine = engine
        self.runtimes = runtimes
        self.launcher = launcher
        self.store = store
        self.replica_store = replica_store
        self.servers = servers
        self.pools = pools
        self.traffic = traffic
        self._lock = threading.Lock()
        # Set as envhub stops: a start still under way then leaves its endpoint's row to the next start.
        self.closing = False

    # -- starting

    def open(self, endpoint: Endpoint, spec: LaunchSpec[Any]) -> Endpoint:
        """Record a prepared launch as starting, within the limits, and start its first replicas in the background."""
        servers = spec.options.replicas.min
        with self.launcher.room(endpoint.owner, servers) as session:
            session.add(endpoint)
            session.flush()
        endpoint = self.store.get(endpoint.id)
        self._start(endpoint, spec, servers, "launch")
        return endpoint

    def _start(self, endpoint: Endpoint, spec: LaunchSpec[Any], servers: int, kind: str) -> None:
        runtime = self.runtimes[endpoint.backend]
        if is_service(runtime):
            spec = replace(spec, replicas=servers)
            threading.Thread(target=self._start_service, args=(runtime, spec), name=f"{kind}-{endpoint.id}").start()
        else:
            self.grow(endpoint, servers, kind, reserved=True)

    def grow(self, endpoint: Endpoint, count: int, kind: str, *, reserved: bool = False) -> int:
        """Start `count` more replicas in the background, as far as the limits allow; how many are starting.

        reserved: the launch has counted them against the limits already.
        """
        spec = self.launcher.spec(endpoint)
        if spec is None:
            self.replica_store.event(
                endpoint.id,
                "hold",
                "cannot start replicas here: it was launched with secrets",
                reasons.LAUNCHED_WITH_SECRETS,
            )
            return 0
        if not reserved:
            try:
                self.launcher.ensure_servers(endpoint.owner, count)
            except EnvhubError as exc:
                self.replica_store.event(endpoint.id, "hold", f"cannot grow by {count}: {exc.message}", exc.code)
                return 0
        for number, row in enumerate(self.replica_store.add(endpoint, capacity_of(endpoint), count)):
            first = number == 0 and kind in ("launch", "restart")  # its progress is the endpoint's
            threading.Thread(
                target=self._start_replica,
                args=(endpoint, row, spec, kind, first),
                name=f"replica-{row.id}",
                daemon=True,
            ).start()
        return count

    def _start_replica(self, endpoint: Endpoint, row: Replica, spec: LaunchSpec[Any], kind: str, first: bool) -> None:
        report = (lambda message: self.note(endpoint.id, message)) if first else (lambda message: None)

        def started(handle: Any) -> None:  # named on its row at once: a restart after a crash can stop it
            self.replica_store.update(row.id, handle=handle.model_dump())

        try:
            launched = self.servers.start(endpoint, row, replace(spec, on_started=started), report)
        except LaunchError as exc:
            self.replica_store.update(row.id, status=ReplicaStatus.FAILED, last_error=exc.message, stopped_at=utcnow())
            self._replica_failed(endpoint.id, exc.message, exc.code)
            return
        replica = self.replica_store.update(
            row.id,
            status=ReplicaStatus.READY,
            internal_url=launched.url,
            handle=launched.handle.model_dump(),
            started_at=utcnow(),
        )
        if replica is None or replica.status != ReplicaStatus.READY:  # stopped while it started
            self.servers.stop_server(endpoint, row.id, launched.handle)
            self._replica_failed(
                endpoint.id, f"replica {row.id} was stopped while it started", reasons.STOPPED_WHILE_STARTING
            )
            return
        self.pools.refresh(endpoint.id)
        current = self.store.update(endpoint.id)
        if current is None or current.status not in ACTIVE or self.closing:
            self.stop_replica(endpoint, replica, status=ReplicaStatus.STOPPED)  # the endpoint stopped meanwhile
            return
        digest = replica.handle.get("digest")
        if digest and current.image_digest is None:
            self.store.update(endpoint.id, image_digest=digest)
            self.launcher.pin_image(endpoint.id, spec, digest)
            if current.revision:
                with Session(self.engine) as session:
                    note_image(session, current.environment, current.revision, digest)
        if current.status == EndpointStatus.STARTING:
            self.traffic.of(endpoint.id).touch()
            self.store.update(
                endpoint.id,
                status=EndpointStatus.RUNNING,
                message=_running(launched.note),
                reason=reasons.RUNNING,
                started_at=utcnow(),
            )
            self.pools.refresh(endpoint.id)
        if kind != "launch":
            joined = f"replica {replica.id} started ({_why(kind)})"
            self.replica_store.event(endpoint.id, kind, joined, reasons.REPLICA_STARTED)

    def _replica_failed(self, endpoint_id: str, message: str, reason: str) -> None:
        """A replica did not start: the endpoint fails when it has none left that run or start."""
        with self._lock:
            current = self.store.update(endpoint_id)
            if current is None or current.status not in ACTIVE or self.closing:
                return  # envhub stopping ended the start: the endpoint starts again with envhub
            if any(
                r.status in (ReplicaStatus.STARTING, ReplicaStatus.READY) for r in self.replica_store.rows(endpoint_id)
            ):
                self.replica_store.event(endpoint_id, "fail", f"a replica did not start: {message}", reason)
                return
            if current.status == EndpointStatus.STARTING:
                self._failed(endpoint_id, message, reason)
            else:
                self.replica_store.event(endpoint_id, "fail", f"a replica did not start: {message}", reason)

    def _start_service(self, runtime: AnyRuntime, spec: LaunchSpec[Any]) -> None:
        """A service runtime starts every replica as one service; its tasks become the replicas' rows."""
        endpoint_id = spec.server_id
        try:
            launched = runtime.start(spec, lambda message: self.note(endpoint_id, message))
        except LaunchError as exc:
            self._failed(endpoint_id, exc.message, exc.code)
            return
        except Exception as exc:
            log.exception("launching %s failed", endpoint_id)
            self._failed(endpoint_id, f"launch failed unexpectedly: {type(exc).__name__}: {exc}", LaunchError.code)
            return
        current = self.store.update(endpoint_id, handle=launched.handle.model_dump())
        if current is None or current.status != EndpointStatus.STARTING:
            runtime.stop(launched.handle)  # stopped while it was starting
            return
        if self.closing:
            return  # the service runs on, and envhub's next start finds it
        self.traffic.of(endpoint_id).touch()
        running = self.store.update(
            endpoint_id,
            status=EndpointStatus.RUNNING,
            message=_running(launched.note),
            reason=reasons.RUNNING,
            started_at=utcnow(),
        )
        assert running is not None
        self.sync_tasks(running)

    def restart(self, endpoint: Endpoint, why: str) -> None:
        """Start an endpoint whose servers are gone again, under its id and at the revision it served: its URL
        keeps working. One that cannot start here again is stopped, saying why."""
        spec = self.launcher.spec(endpoint)
        if spec is None:
            lost = (
                "it was launched with secrets, which envhub does not keep"
                if endpoint.options.get("secrets")
                else (f"its {endpoint.backend.value} backend or its environment is not available here")
            )
            self.end(
                endpoint.id, f"{why}, and it cannot start again: {lost}; launch it again", reasons.CANNOT_START_AGAIN
            )
            return
        self.store.update(
            endpoint.id, status=EndpointStatus.STARTING, message=f"starting again: {why}", reason=reasons.STARTING_AGAIN
        )
        size = ReplicaRange.model_validate(endpoint.options.get("replicas", 1))
        self._start(endpoint, spec, size.min, "restart")

    def resume(self, endpoint_id: str) -> None:
        """An endpoint taken over whose launch was cut short once its servers ran: it runs."""
        self.store.update(endpoint_id, status=EndpointStatus.RUNNING, message="running", reason=reasons.RUNNING)
        self.pools.refresh(endpoint_id)

    def note(self, endpoint_id: str, message: str, reason: str | None = None) -> None:
        """What the endpoint is doing now, on its row; its reason stays unless one is given (a launch's progress is
        part of its starting)."""
        self.store.update(endpoint_id, message=message, **({"reason": reason} if reason is not None else {}))

    # -- the replicas of a running pool

    def sync_tasks(self, endpoint: Endpoint) -> tuple[list[Task], list[Replica]]:
        """A service's tasks taken into the rows: the tasks, and the replicas that ended (their sessions are told)."""
        read = self.servers.read_tasks(endpoint)
        if read is None:
            return [], []
        tasks, ready = read
        ended = self.replica_store.take_tasks(endpoint, tasks, ready)
        pool = self.pools.known(endpoint.id)
        for replica in ended:
            _tell(endpoint, pool, replica.id, f"replica {replica.id}: {replica.last_error}")
        self.pools.refresh(endpoint.id)
        return tasks, ended

    def drain(self, endpoint: Endpoint, replica_id: str) -> None:
        """A replica takes no new session, and is stopped when its last one ends."""
        self.replica_store.update(replica_id, status=ReplicaStatus.DRAINING)
        pool = self.pools.known(endpoint.id)
        if pool is not None:
            pool.drain(replica_id)

    def lose(self, endpoint: Endpoint, replica: Replica, reason: str) -> None:
        """A replica that died or hung: its sessions are told, and it is stopped."""
        self.replica_store.update(replica.id, status=ReplicaStatus.UNHEALTHY, last_error=reason)
        _tell(endpoint, self.pools.known(endpoint.id), replica.id, reason)
        self.stop_replica(endpoint, replica, status=ReplicaStatus.FAILED, error=reason)

    def stop_replica(self, endpoint: Endpoint, replica: Replica, *, status: ReplicaStatus, error: str = "") -> None:
        """Record how a replica ended, and stop its server when there is one left."""
        self.replica_store.update(
            replica.id, status=status, last_error=error or replica.last_error, stopped_at=utcnow()
        )
        self.pools.refresh(endpoint.id)
        self.servers.stop(endpoint, replica)

    # -- stopping

    def close(self) -> None:
        """envhub stops: each of its process endpoints' servers stops, and the endpoint starts again with envhub
        (under its id); one that could not (launched with secrets) is stopped. Containers, services and Spaces run
        on. A start under way from now on leaves its row to the next start. The servers stop side by side: each
        may take its grace after SIGTERM."""
        self.closing = True
        endpoints = [
            endpoint
            for endpoint in self.store.list(active_only=True)
            if endpoint.backend == Backend.PROCESS and endpoint.instance == self.launcher.instance
        ]
        if not endpoints:
            return
        plural = "" if len(endpoints) == 1 else "s"
        log.info("stopping %d endpoint%s: %s", len(endpoints), plural, ", ".join(e.id for e in endpoints))
        with ThreadPoolExecutor(max_workers=len(endpoints), thread_name_prefix="envhub-close") as pool:
            for done in [pool.submit(self._close_one, endpoint) for endpoint in endpoints]:
                done.result()

    def _close_one(self, endpoint: Endpoint) -> None:
        if endpoint.options.get("secrets"):
            stopped = "envhub stopped; it was launched with secrets, which envhub does not keep: launch it again"
            self.end(endpoint.id, stopped, reasons.STOPPED_WITH_ENVHUB)
            return
        self.store.update(
            endpoint.id, status=EndpointStatus.STARTING, message=_BACK_WITH_ENVHUB, reason=reasons.WAITING_FOR_ENVHUB
        )
        self._stop_servers(endpoint, ReplicaStatus.STOPPED, "envhub stopped")

    def end(self, endpoint_id: str, message: str, reason: str) -> Endpoint:
        """Stop an endpoint's servers and record why (on request, idle, envhub stopping): message and its code."""
        endpoint = self.store.get(endpoint_id)
        if endpoint.status in (EndpointStatus.STOPPED, EndpointStatus.FAILED):
            return endpoint
        self.store.update(endpoint_id, status=EndpointStatus.STOPPING, message="stopping", reason=reasons.STOPPING)
        try:
            self._stop_servers(endpoint, ReplicaStatus.STOPPED, message)
        except EnvhubError as exc:
            self._failed(endpoint_id, exc.message, exc.code)
            raise
        stopped = self.store.update(
            endpoint_id, status=EndpointStatus.STOPPED, message=message, reason=reason, stopped_at=utcnow()
        )
        assert stopped is not None
        return stopped

    def fail(self, endpoint: Endpoint, message: str, reason: str) -> None:
        """An endpoint that cannot go on: whatever is left of it is stopped, and the row says why."""
        self._stop_servers(endpoint, ReplicaStatus.FAILED, message)
        self._failed(endpoint.id, message, reason)

    def _failed(self, endpoint_id: str, message: str, reason: str) -> None:
        self.store.update(
            endpoint_id, status=EndpointStatus.FAILED, message=message, reason=reason, stopped_at=utcnow()
        )

    def _stop_servers(self, endpoint: Endpoint, status: ReplicaStatus, reason: str) -> None:
        pool = self.pools.known(endpoint.id)
        self.pools.forget(endpoint.id)
        self.launcher.forget(endpoint.id)
        runtime = self.runtimes.get(endpoint.backend)
        service = handle_of(runtime, endpoint.handle) if runtime is not None else None
        for replica in self.replica_store.rows(endpoint.id):
            if pool is not None:
                pool.lose(replica.id, reason)
            self.stop_replica(endpoint, replica, status=status, error="" if status == ReplicaStatus.STOPPED else reason)
        if runtime is not None and service is not None:
            runtime.stop(service)


_BACK_WITH_ENVHUB = "envhub stopped; it starts again under this id when envhub starts"


def _tell(endpoint: Endpoint, pool: Pool | None, replica_id: str, reason: str) -> None:
    """The replica's sessions hear that they were lost, and why."""
    if pool is not None:
        pool.lose(replica_id, f"endpoint {endpoint.id} lost this session: {reason}; start a new session")


def _running(note: str) -> str:
    """A running endpoint's status, with what its launch did otherwise than the environment's files say."""
    return f"running; {note}" if note else "running"


def _why(kind: str) -> str:
    return {
        "grow": "sessions were waiting or the pool was nearly full",
        "replace": "to keep the pool's min",
        "restart": "envhub started again",
    }.get(kind, kind)
