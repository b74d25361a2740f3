"""An endpoint's replicas: starting and stopping each server of its pool, and the pool's events.

A replica is one server behind the endpoint's URL, with a row of its own (hosting.models
Replica). The first one's id is the endpoint's, the next `<endpoint>-2`, `-3` ...; each
logs to `<replica id>.log`. A service runtime (the swarm's) runs one service for the
whole pool: its tasks are the replicas, read from the orchestrator (sync_tasks).
"""

import logging
import socket
import threading
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, func
from sqlmodel import Session, col, select

from core.clock import utcnow
from core.errors import EnvhubError, LaunchError
from gateway.pools import Pool
from hosting.models import (
    LIVE,
    Backend,
    Endpoint,
    PoolEvent,
    PoolEventPublic,
    PoolPublic,
    Replica,
    ReplicaPublic,
    ReplicaStatus,
)
from hosting.options import ReplicaRange
from hosting.routing import Routes
from hosting.runtimes import AnyRuntime, Handle, LaunchSpec, ProcessHandle, Report, Task, handle_of, is_service
from hosting.runtimes.logs import LIVENESS_QUERY, death_note
from hosting.runtimes.processes import resident_bytes

__all__ = ["Replicas", "capacity_of", "replica_id"]

log = logging.getLogger(__name__)

_EVENTS_SHOWN = 12
_HOST = socket.gethostname()


def replica_id(endpoint_id: str, number: int) -> str:
    """The first replica is known by its endpoint's id, so a pool of one is the server it always was."""
    return endpoint_id if number == 1 else f"{endpoint_id}-{number}"


class Replicas:
    """The rows of every endpoint's replicas, and the servers behind them."""

    def __init__(self, engine: Engine, runtimes: dict[Backend, AnyRuntime], routes: Routes, logs_dir: Path) -> None:
        self.engine = engine
        self.runtimes = runtimes
        self.routes = routes
        routes.on_capacity = self.note_capacity
        self.logs_dir = logs_dir
        self._lock = threading.Lock()
        # Replicas this process is starting: a stop meanwhile only marks the row, and the start stops the server
        # once it has started (one that has not yet served may not take SIGTERM: a sandbox's pid 1 ignores it).
        self._starting: set[str] = set()

    # -- reading

    def rows(self, endpoint_id: str, *, live_only: bool = True, ready_only: bool = False) -> list[Replica]:
        statement = select(Replica).where(col(Replica.endpoint) == endpoint_id).order_by(col(Replica.created_at))
        if ready_only:
            statement = statement.where(col(Replica.status) == ReplicaStatus.READY)
        elif live_only:
            statement = statement.where(col(Replica.status).in_(LIVE))
        with Session(self.engine) as session:
            return list(session.exec(statement).all())

    def log_path(self, replica: str) -> Path:
        return self.logs_dir / f"{replica}.log"

    def handle(self, endpoint: Endpoint, replica: Replica) -> Handle | None:
        runtime = self.runtimes.get(endpoint.backend)
        return handle_of(runtime, replica.handle) if runtime is not None else None

    def resident_bytes(self, endpoint: Endpoint) -> int | None:
        """The memory the endpoint's ready servers hold together, where envhub can see it: process servers only."""
        total = None
        for row in self.rows(endpoint.id, ready_only=True):
            handle = self.handle(endpoint, row)
            held = resident_bytes(handle.pid) if isinstance(handle, ProcessHandle) else None
            if held is None:
                return None
            total = (total or 0) + held
        return total

    # -- one server per replica (process, docker)

    def add(self, endpoint: Endpoint, capacity: int | None, count: int) -> list[Replica]:
        """Rows for `count` more replicas, starting, in one write: a decision made meanwhile sees all or none."""
        with self._lock, Session(self.engine, expire_on_commit=False) as session:
            known = session.exec(select(func.count()).where(col(Replica.endpoint) == endpoint.id)).one()
            rows = [
                Replica(id=replica_id(endpoint.id, known + n), endpoint=endpoint.id, capacity=capacity, host=_HOST)
                for n in range(1, count + 1)
            ]
            session.add_all(rows)
            session.commit()
            return rows

    def start(self, endpoint: Endpoint, row: Replica, spec: LaunchSpec[Any], report: Report) -> tuple[Replica, str]:
        """Start an added replica's server and wait until it serves: its row, and how it runs otherwise than the
        environment's files say (Launched.note); LaunchError (its row says why) when it cannot."""
        runtime = self.runtimes[endpoint.backend]

        def started(handle: Any) -> None:  # named on its row at once: a restart after a crash can stop it
            self.update(row.id, handle=handle.model_dump())

        spec = replace(spec, server_id=row.id, log_path=self.log_path(row.id), on_started=started)
        self._starting.add(row.id)
        try:
            launched = runtime.start(spec, report)
        except LaunchError as exc:
            self.update(row.id, status=ReplicaStatus.FAILED, last_error=exc.message, stopped_at=utcnow())
            raise
        except Exception as exc:
            log.exception("starting replica %s failed", row.id)
            message = f"launch failed unexpectedly: {type(exc).__name__}: {exc}"
            self.update(row.id, status=ReplicaStatus.FAILED, last_error=message, stopped_at=utcnow())
            raise LaunchError(message) from exc
        finally:
            self._starting.discard(row.id)
        ready = self.update(
            row.id,
            status=ReplicaStatus.READY,
            internal_url=launched.url,
            handle=launched.handle.model_dump(),
            started_at=utcnow(),
        )
        if ready is None or ready.status != ReplicaStatus.READY:  # stopped while it started
            runtime.stop(launched.handle)
            raise LaunchError(f"replica {row.id} was stopped while it started")
        self.routes.refresh(endpoint.id)
        return ready, launched.note

    def stop(self, endpoint: Endpoint, replica: Replica, *, status: ReplicaStatus, error: str = "") -> None:
        """Stop a replica's server (when there is one left) and record how it ended."""
        self.update(replica.id, status=status, last_error=error or replica.last_error, stopped_at=utcnow())
        self.routes.refresh(endpoint.id)
        if replica.id in self._starting:
            return
        handle = self.handle(endpoint, replica)
        if handle is not None and not endpoint.handle:  # a service's tasks are stopped by scaling the service
            try:
                self.runtimes[endpoint.backend].stop(handle)
            except EnvhubError as exc:
                log.warning("could not stop replica %s: %s", replica.id, exc.message)

    def is_running(self, endpoint: Endpoint, replica: Replica) -> bool:
        handle = self.handle(endpoint, replica)
        return handle is not None and self.runtimes[endpoint.backend].is_running(handle)

    def death_note(self, replica: Replica) -> str:
        return death_note(self.log_path(replica.id))

    # -- a service's tasks (swarm)

    def sync_tasks(self, endpoint: Endpoint, pool: Pool | None) -> tuple[list[Task], list[Replica]]:
        """Rows for the service's tasks as the orchestrator reports them: the running ones ready, those it
        shut down or that failed ended. The tasks, and the replicas that ended (they lost their sessions)."""
        runtime = self.runtimes[endpoint.backend]
        service = handle_of(runtime, endpoint.handle)
        if service is None or not is_service(runtime):
            return [], []
        tasks = runtime.tasks(service)
        seen = {task.id: task for task in tasks}
        capacity = capacity_of(endpoint)
        ended: list[Replica] = []
        serving = {r.id for r in self.rows(endpoint.id, ready_only=True)}
        headers = runtime.auth_headers(service)
        answering = {t.id for t in tasks if t.running and t.id not in serving and self._answers(t, headers)}
        with self._lock, Session(self.engine, expire_on_commit=False) as session:
            rows = {r.id: r for r in session.exec(select(Replica).where(col(Replica.endpoint) == endpoint.id)).all()}
            for task in tasks:
                row = rows.get(task.id)
                # Running is not serving: a task takes sessions once its server answers /health.
                ready = task.running and (task.id in answering or task.id in serving)
                status = ReplicaStatus.READY if ready else ReplicaStatus.STARTING
                if row is None:
                    row = Replica(id=task.id, endpoint=endpoint.id, capacity=capacity, handle=endpoint.handle)
                elif row.status not in (ReplicaStatus.STARTING, ReplicaStatus.READY):
                    continue  # draining, or found hung: envhub's word stands until the task goes
                row.sqlmodel_update(
                    {"status": status, "internal_url": task.url, "host": task.host, "last_error": task.error}
                )
                if ready and row.started_at is None:
                    row.started_at = task.started_at or utcnow()
                session.add(row)
            for row in rows.values():
                if row.status in LIVE and row.id not in seen:
                    row.status, row.stopped_at = ReplicaStatus.FAILED, utcnow()
                    row.last_error = row.last_error or "the swarm shut its task down"
                    session.add(row)
                    ended.append(row)
            session.commit()
        self.routes.refresh(endpoint.id)
        return tasks, ended

    @staticmethod
    def _answers(task: Task, headers: dict[str, str]) -> bool:
        try:
            return httpx.get(f"{task.url}/health?{LIVENESS_QUERY}", headers=headers, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    # -- rows and events

    def update(self, replica: str, **values: Any) -> Replica | None:
        with Session(self.engine) as session:
            row = session.get(Replica, replica)
            if row is None:
                return None
            row.sqlmodel_update(values)
            session.add(row)
            session.commit()
            session.refresh(row)
            return row

    def note_capacity(self, replica: str, capacity: int) -> None:
        """What a server said it holds, kept for every envhub's gateway."""
        self.update(replica, capacity=capacity)

    def event(self, endpoint_id: str, kind: str, message: str) -> None:
        log.info("endpoint %s: %s", endpoint_id, message)
        with Session(self.engine) as session:
            session.add(PoolEvent(endpoint=endpoint_id, kind=kind, message=message))
            session.commit()

    def losses(self, endpoint_id: str, within_s: float) -> int:
        """How many replicas the endpoint lost lately."""
        since = utcnow() - timedelta(seconds=within_s)
        with Session(self.engine) as session:
            counted = select(func.count()).where(
                col(PoolEvent.endpoint) == endpoint_id, col(PoolEvent.kind) == "lost", col(PoolEvent.at) >= since
            )
            return session.exec(counted).one()

    def public(self, endpoint: Endpoint, pool: Pool | None) -> PoolPublic:
        """The pool as the API shows it: its replicas, what they hold and carry, and its last events."""
        size = ReplicaRange.model_validate(endpoint.options.get("replicas", 1))
        with Session(self.engine) as session:
            rows = session.exec(
                select(Replica)
                .where(col(Replica.endpoint) == endpoint.id)
                .order_by(col(Replica.created_at).desc())
                .limit(size.max + 8)
            ).all()
            events = session.exec(
                select(PoolEvent)
                .where(col(PoolEvent.endpoint) == endpoint.id)
                .order_by(col(PoolEvent.id).desc())
                .limit(_EVENTS_SHOWN)
            ).all()
        slots = pool.slots if pool is not None else {}
        replicas = []
        for row in sorted(rows, key=lambda r: r.created_at):
            slot = slots.get(row.id)
            said = slot.said if slot is not None else row.capacity is not None
            capacity = slot.capacity if slot is not None else row.capacity or 1
            replicas.append(
                ReplicaPublic(
                    id=row.id,
                    status=row.status,
                    internal_url=row.internal_url,
                    host=row.host,
                    sessions=slot.sessions if slot is not None else 0,
                    capacity=capacity,
                    capacity_said=said,
                    started_at=row.started_at,
                    last_error=row.last_error,
                )
            )
        taking = [r for r in replicas if r.status == ReplicaStatus.READY]
        per_replica = max((r.capacity for r in replicas if r.capacity_said), default=1)
        return PoolPublic(
            min=size.min,
            max=size.max,
            sessions=sum(r.sessions for r in replicas),
            capacity=sum(r.capacity for r in taking),
            capacity_at_max=per_replica * size.max,
            generation_batch_size=per_replica * size.max,
            waiting=pool.waiting if pool is not None else 0,
            replicas=replicas,
            events=[PoolEventPublic(at=e.at, kind=e.kind, message=e.message) for e in events],
        )


def capacity_of(endpoint: Endpoint) -> int | None:
    """The sessions each server holds when the launch said (MAX_CONCURRENT_ENVS)."""
    value = str((endpoint.options.get("env") or {}).get("MAX_CONCURRENT_ENVS", ""))
    return int(value) if value.isdigit() and int(value) > 0 else None
