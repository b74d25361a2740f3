"""Leases in the database: one holder at a time, renewal, expiry, release, a dead holder on this host; syncs."""

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, select
from sqlmodel import Session, col

from app.made_from_settings import hub_from_settings
from app.settings import Settings
from catalog.models import SyncRun, SyncStatus
from catalog.sync import SYNC_RUNNING, Syncer, close_interrupted_runs, get_sync_run, last_sync_started
from core.db import create_db_engine
from core.errors import ConflictError
from core.leases import INSTANCE_PREFIX, Leases, gone_from_this_host
from tests.clock import ManualClock
from tests.conftest import space_files, wait_until
from tests.fakehub import FakeHub, Fault

pytestmark = pytest.mark.databases  # on SQLite and, given ENVHUB_TEST_POSTGRES_URL, on Postgres


@pytest.fixture
def other_engine(settings: Settings, engine: Engine) -> Iterator[Engine]:
    """A second engine on the same database file, as another instance has."""
    second = create_db_engine(settings.database_url)
    yield second
    second.dispose()


def test_one_holder_at_a_time_until_release(engine: Engine, other_engine: Engine) -> None:
    a, b = Leases(engine, ttl_s=30), Leases(other_engine, ttl_s=30)

    assert a.acquire("sync")
    assert not b.acquire("sync")
    assert a.acquire("sync")  # renewing
    assert (a.holder("sync"), b.holder("sync")) == (a.instance, a.instance)
    assert b.holds("sync") is False

    a.release("sync")
    assert b.acquire("sync")
    assert not a.acquire("sync")


def test_an_expired_lease_goes_to_the_next_instance(engine: Engine, other_engine: Engine) -> None:
    clock = ManualClock()
    a, b = Leases(engine, ttl_s=30, clock=clock), Leases(other_engine, ttl_s=30, clock=clock)
    assert a.acquire("health")
    clock.advance(29)
    assert not b.acquire("health")  # not yet expired
    assert a.holder("health") == a.instance

    clock.advance(2)

    assert a.holder("health") is None
    assert b.acquire("health")
    assert not a.acquire("health")
    assert not a.holds("health")


def test_many_instances_racing_for_a_new_lease_give_one_holder(engine: Engine, settings: Settings) -> None:
    engines = [create_db_engine(settings.database_url) for _ in range(8)]
    contenders = [Leases(e, ttl_s=30) for e in engines]
    won: list[str] = []
    start = threading.Barrier(len(contenders))

    def race(leases: Leases) -> None:
        start.wait()
        if leases.acquire("race"):
            won.append(leases.instance)

    threads = [threading.Thread(target=race, args=(c,)) for c in contenders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for e in engines:
        e.dispose()

    assert len(won) == 1
    assert Leases(engine).holder("race") == won[0]


def test_the_keeper_renews_and_stop_gives_everything_back(engine: Engine, other_engine: Engine) -> None:
    clock = ManualClock()
    a, b = Leases(engine, ttl_s=30, clock=clock), Leases(other_engine, ttl_s=30, clock=clock)
    a.start()
    try:
        assert a.acquire("sync")
        wait_until(lambda: clock.waiting == 1)  # the keeper waits for its next round, a third of the TTL on
        clock.advance(31)  # past the TTL: only the keeper's renewal keeps it
        wait_until(lambda: b.holder("sync") == a.instance)
        assert not b.acquire("sync")
        assert a.instance in b.live_instances()
    finally:
        a.stop()
    assert b.live() == {}
    assert b.acquire("sync")
    assert b.live_instances() == {b.instance}


def test_a_holder_whose_process_is_gone_is_replaced_at_once(engine: Engine) -> None:
    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = f"{socket.gethostname()}-{exited.stdout.strip()}-abcdef"
    assert gone_from_this_host(dead)
    assert not gone_from_this_host(f"elsewhere-{exited.stdout.strip()}-abcdef")  # another host: wait for expiry
    previous = Leases(engine, ttl_s=30, instance=dead)
    previous.acquire("sync")
    previous.acquire(INSTANCE_PREFIX + dead)

    successor = Leases(engine, ttl_s=30)

    assert successor.holder("sync") is None
    assert dead not in successor.live_instances()
    assert successor.acquire("sync")


def test_a_sync_on_one_instance_refuses_one_on_another_and_is_not_called_interrupted(
    settings: Settings, engine: Engine, other_engine: Engine, hub: FakeHub
) -> None:
    hub.add_space("alice/count", files=space_files("Count"))
    hub.fail("GET", "/api/spaces", Fault(hang_s=1))
    a = Syncer(engine, hub_from_settings(settings), leases=Leases(engine))
    b = Syncer(other_engine, hub_from_settings(settings), leases=Leases(other_engine))

    running = a.start()
    with pytest.raises(ConflictError) as held:
        b.run()
    assert a.leases.instance in held.value.message  # the instance that holds it, named
    close_interrupted_runs(other_engine, b.leases)  # what an instance starting now does

    wait_until(lambda: not a.running)
    with Session(engine) as session:
        assert get_sync_run(session, running.id).status == SyncStatus.OK
        assert get_sync_run(session, running.id).instance == a.leases.instance
    assert b.run().status == SyncStatus.OK


def test_the_run_of_an_instance_that_died_is_closed_and_the_schedule_ignores_it(
    settings: Settings, engine: Engine
) -> None:
    clock = ManualClock()
    dead = Leases(engine, ttl_s=30, clock=clock)
    assert dead.acquire(SYNC_RUNNING)
    with Session(engine) as session:
        session.add(SyncRun(instance=dead.instance))
        session.commit()
    survivor = Leases(engine, ttl_s=30, clock=clock)

    close_interrupted_runs(engine, survivor)
    with Session(engine) as session:
        assert session.execute(select(col(SyncRun.status))).scalar_one() == SyncStatus.RUNNING  # its holder lives

    clock.advance(31)  # the dead instance's lease expires
    close_interrupted_runs(engine, survivor)
    with Session(engine) as session:
        run = session.execute(select(SyncRun)).scalar_one()
        assert (run.status, run.error) == (SyncStatus.FAILED, "interrupted: envhub stopped during this sync")
        assert last_sync_started(session) is None  # so the next background sync is due at once
