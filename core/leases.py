"""Leases in the database: which instance runs the background sync, the health rounds, a sync now.

Several envhub processes (instances) may share one database. Each process start gets an
instance id (`host-pid-random`). A lease is a row (name, holder, expires_at): an instance
takes it with one conditional UPDATE that succeeds only when the lease is free, expired
or already its own, or with an INSERT when no row exists yet; whichever statement
changes a row wins, so two instances never both hold a lease. A keeper thread renews what
its instance holds every third of the TTL, and its own `instance:<id>` lease says that the
instance is alive. When an instance dies its leases expire after the TTL and another takes
over; on the same host a holder whose process is gone is known dead at once.

Expiry times come from each instance's clock, so instances on several machines need their
clocks in step to well within the TTL (NTP does that).
"""

import logging
import os
import secrets
import socket
import threading
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import OperationalError
from sqlmodel import Field, Session, SQLModel, col

from core.clock import SYSTEM_CLOCK, Clock

__all__ = ["INSTANCE_PREFIX", "Lease", "Leases", "new_instance_id"]

log = logging.getLogger(__name__)


class Lease(SQLModel, table=True):
    """A named right (run the background sync, say) held by one envhub instance until it expires."""

    name: str = Field(primary_key=True)
    holder: str = Field(description="the instance id: host-pid-random")
    expires_at: datetime = Field(index=True)


INSTANCE_PREFIX = "instance:"  # the lease each live instance holds on itself


_STARTED_HERE: set[str] = set()  # instance ids made by this process


def new_instance_id() -> str:
    """host-pid-random: unique per process start, and says where the process runs."""
    instance = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
    _STARTED_HERE.add(instance)
    return instance


def gone_from_this_host(instance: str) -> bool:
    """An instance id of this host whose process no longer runs (an earlier life of this one, say)."""
    parts = instance.rsplit("-", 2)
    if len(parts) != 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        # This process has that pid now, so unless it made the id itself, the one that had it is gone.
        return instance not in _STARTED_HERE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # some process of another user has that pid: assume alive
    return False


def _changed_one(session: Session, statement: Any) -> bool:
    """Run an UPDATE or INSERT and say whether it changed a row (RETURNING: rowcount is not portable)."""
    return session.execute(statement.returning(col(Lease.name))).first() is not None


class Leases:
    """The leases one instance holds, and what it knows of the others'."""

    def __init__(
        self, engine: Engine, *, ttl_s: float = 30, instance: str | None = None, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.engine = engine
        self.clock = clock  # expiry times, and the keeper's rounds
        self.ttl = timedelta(seconds=ttl_s)
        self.instance = instance or new_instance_id()
        _STARTED_HERE.add(self.instance)
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._keeper: threading.Thread | None = None

    # -- taking, keeping, giving back

    def acquire(self, name: str) -> bool:
        """Take the lease, or renew it when already held; True when this instance holds it now."""
        now = self.clock.now()
        expires = now + self.ttl
        with Session(self.engine) as session, session.begin():
            won = _changed_one(
                session,
                update(Lease)
                .where(
                    col(Lease.name) == name,
                    (col(Lease.holder) == self.instance) | (col(Lease.expires_at) < now),
                )
                .values(holder=self.instance, expires_at=expires),
            )
            if not won:
                insert = sqlite_insert if session.get_bind().dialect.name == "sqlite" else postgresql_insert
                statement = insert(Lease).values(name=name, holder=self.instance, expires_at=expires)
                won = _changed_one(session, statement.on_conflict_do_nothing(index_elements=["name"]))
            if not won:
                holder = session.execute(select(col(Lease.holder)).where(col(Lease.name) == name)).scalar()
                if holder is not None and gone_from_this_host(holder):
                    # Its process is gone: no need to wait for the lease to expire.
                    won = _changed_one(
                        session,
                        update(Lease)
                        .where(col(Lease.name) == name, col(Lease.holder) == holder)
                        .values(holder=self.instance, expires_at=expires),
                    )
        with self._lock:
            if won:
                self._held.add(name)
            else:
                self._held.discard(name)
        return won

    def release(self, name: str) -> None:
        """Give the lease back now, so another instance need not wait for it to expire."""
        with self._lock:
            self._held.discard(name)
        with Session(self.engine) as session, session.begin():
            session.execute(delete(Lease).where(col(Lease.name) == name, col(Lease.holder) == self.instance))

    def holds(self, name: str) -> bool:
        """Whether this instance held the lease at its last renewal."""
        with self._lock:
            return name in self._held

    def renew(self) -> None:
        """Renew every lease held, and this instance's own; a lease lost to a stall is dropped."""
        for name in self._names_held() | {INSTANCE_PREFIX + self.instance}:
            if not self.acquire(name) and name != INSTANCE_PREFIX + self.instance:
                log.warning("instance %s lost the %s lease to another instance", self.instance, name)

    def _names_held(self) -> set[str]:
        with self._lock:
            return set(self._held)

    # -- the keeper thread

    def start(self) -> None:
        """Say this instance is alive, and keep renewing its leases until stop()."""
        self.acquire(INSTANCE_PREFIX + self.instance)
        self._stopping.clear()
        self._keeper = threading.Thread(target=self._keep, name="envhub-leases", daemon=True)
        self._keeper.start()

    def _keep(self) -> None:
        interval = self.ttl.total_seconds() / 3
        while not self.clock.wait(self._stopping, interval):
            try:
                self.renew()
            except OperationalError as exc:  # the database is away for a moment: try again next time
                log.warning("renewing leases failed: %s", exc)
            except Exception:  # whatever else: the keeper must go on, or the others take over
                log.exception("renewing leases failed")

    def stop(self) -> None:
        """Stop renewing and give back every lease, the instance's own last."""
        self._stopping.set()
        if self._keeper is not None:
            self._keeper.join(timeout=10)
        with self._lock:
            self._held.clear()
        with Session(self.engine) as session, session.begin():
            session.execute(delete(Lease).where(col(Lease.holder) == self.instance))

    # -- what the others hold

    def holder(self, name: str) -> str | None:
        """The instance holding a lease now, or None when it is free, expired or its holder is gone."""
        with Session(self.engine) as session:
            holder = session.execute(
                select(col(Lease.holder)).where(col(Lease.name) == name, col(Lease.expires_at) >= self.clock.now())
            ).scalar()
        return None if holder is None or gone_from_this_host(holder) else holder

    def live(self) -> dict[str, str]:
        """Every unexpired lease by name, with its holder (instances' own leases included)."""
        with Session(self.engine) as session:
            rows = session.execute(
                select(col(Lease.name), col(Lease.holder)).where(col(Lease.expires_at) >= self.clock.now())
            ).all()
        return {name: holder for name, holder in rows if not gone_from_this_host(holder)}

    def live_instances(self) -> set[str]:
        """The instances alive now, this one always among them."""
        alive = {h for n, h in self.live().items() if n.startswith(INSTANCE_PREFIX)}
        return alive | {self.instance}

    def alive(self, instances: Iterable[str]) -> set[str]:
        """Which of these instances are alive."""
        return set(instances) & self.live_instances()
