"""The rows of every endpoint's replicas, and its pool's events: what the API and the scaler read, and what
starting, stopping and the orchestrator's reports write (the servers themselves are hosting/replicas.py's).

A replica is one server behind the endpoint's URL. The first one's id is the endpoint's, the next
`<endpoint>-2`, `-3` ...
"""

import logging
import socket
import threading
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, func
from sqlmodel import Session, col, select

from core.clock import utcnow
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
from hosting.runtimes.base import Task

__all__ = ["ReplicaStore", "capacity_of", "replica_id"]

log = logging.getLogger(__name__)

_EVENTS_SHOWN = 12
_HOST = socket.gethostname()


def replica_id(endpoint_id: str, number: int) -> str:
    """The first replica is known by its endpoint's id, so a pool of one is the server it always was."""
    return endpoint_id if number == 1 else f"{endpoint_id}-{number}"


class ReplicaStore:
    """Every endpoint's replicas as rows, and their pools' events."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()  # adding rows and taking in a service's tasks: one at a time in this process

    def rows(self, endpoint_id: str, *, live_only: bool = True, ready_only: bool = False) -> list[Replica]:
        statement = select(Replica).where(col(Replica.endpoint) == endpoint_id).order_by(col(Replica.created_at))
        if ready_only:
            statement = statement.where(col(Replica.status) == ReplicaStatus.READY)
        elif live_only:
            statement = statement.where(col(Replica.status).in_(LIVE))
        with Session(self.engine) as session:
            return list(session.exec(statement).all())

    def live_on(self, backend: Backend, *, besides: str) -> list[Replica]:
        """The live replicas of every endpoint on `backend`, but replica `besides`."""
        statement = (
            select(Replica)
            .join(Endpoint, col(Endpoint.id) == col(Replica.endpoint))
            .where(col(Endpoint.backend) == backend, col(Replica.status).in_(LIVE), col(Replica.id) != besides)
        )
        with Session(self.engine) as session:
            return list(session.exec(statement).all())

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

    def take_tasks(self, endpoint: Endpoint, tasks: list[Task], ready: set[str]) -> list[Replica]:
        """Rows for a service's tasks as the orchestrator reports them: the `ready` ones ready, the others starting,
        those gone ended. The replicas that ended (they lost their sessions)."""
        seen = {task.id for task in tasks}
        capacity = capacity_of(endpoint)
        ended: list[Replica] = []
        with self._lock, Session(self.engine, expire_on_commit=False) as session:
            rows = {r.id: r for r in session.exec(select(Replica).where(col(Replica.endpoint) == endpoint.id)).all()}
            for task in tasks:
                row = rows.get(task.id)
                status = ReplicaStatus.READY if task.id in ready else ReplicaStatus.STARTING
                if row is None:
                    row = Replica(id=task.id, endpoint=endpoint.id, capacity=capacity, handle=endpoint.handle)
                elif row.status not in (ReplicaStatus.STARTING, ReplicaStatus.READY):
                    continue  # draining, or found hung: envhub's word stands until the task goes
                row.sqlmodel_update(
                    {"status": status, "internal_url": task.url, "host": task.host, "last_error": task.error}
                )
                if task.id in ready and row.started_at is None:
                    row.started_at = task.started_at or utcnow()
                session.add(row)
            for row in rows.values():
                if row.status in LIVE and row.id not in seen:
                    row.status, row.stopped_at = ReplicaStatus.FAILED, utcnow()
                    row.last_error = row.last_error or "the swarm shut its task down"
                    session.add(row)
                    ended.append(row)
            session.commit()
        return ended

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

    def event(self, endpoint_id: str, kind: str, message: str, reason: str) -> None:
        log.info("endpoint %s: %s", endpoint_id, message)
        with Session(self.engine) as session:
            session.add(PoolEvent(endpoint=endpoint_id, kind=kind, message=message, reason=reason))
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
            events=[PoolEventPublic(at=e.at, kind=e.kind, message=e.message, reason=e.reason) for e in events],
        )


def capacity_of(endpoint: Endpoint) -> int | None:
    """The sessions each server holds when the launch said (MAX_CONCURRENT_ENVS)."""
    value = str((endpoint.options.get("env") or {}).get("MAX_CONCURRENT_ENVS", ""))
    return int(value) if value.isdigit() and int(value) > 0 else None
