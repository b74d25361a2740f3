"""Two envhub instances on one database: syncs, leases, endpoints and the gateway across them.

The first tests run two endpoint managers in one process, each with its own leases (its
own instance id), over one database; the last ones start two real `python -m app serve`
processes on one database, as instances are deployed (on Postgres, as they are deployed, when the tests have one).
"""

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient
from sqlalchemy import Engine, text

from app.settings import Settings
from catalog.hub import HubClient
from catalog.templates import index_templates
from core.callers import ANONYMOUS
from core.db import exclusive
from core.errors import TooManyRequestsError
from core.leases import Leases
from core.outbound import OutboundGuard
from hosting.assembly import Hosting, build_hosting
from hosting.endpoints import EndpointManager
from hosting.limits import LIMITS_LOCK, EndpointLimits
from hosting.models import Backend, EndpointStatus, ReplicaStatus
from hosting.monitor import HEALTH_LEASE, HealthMonitor
from hosting.options import LaunchRequest
from hosting.runtimes.base import AnyRuntime
from hosting.runtimes.process import ProcessRuntime
from tests.conftest import ADMIN_TOKEN, space_files, wait_until
from tests.fakehub import FakeHub, Fault
from tests.test_cli import cli_env
from tests.test_endpoints import server_pids
from tests.test_serve import Server

# Instances share a database on Postgres (beyond one machine): there, given ENVHUB_TEST_POSTGRES_URL, else on SQLite.
pytestmark = pytest.mark.databases("postgres")

STARTUP_S = 90  # importing the app takes a while on a loaded machine
IDLE_S = 4  # the endpoints' idle limit in the in-process instances

# -- two managers in one process


@contextmanager
def two_instances(engine: Engine, tmp_path: Path, limits: EndpointLimits) -> Iterator[list[Hosting]]:
    """Instances a and b, each hosting's parts with leases of their own, over one database."""
    instances = []
    for name in ("a", "b"):
        leases = Leases(engine, ttl_s=30)
        leases.start()
        runtimes: dict[Backend, AnyRuntime] = {Backend.PROCESS: ProcessRuntime(tmp_path / name / "runtime")}
        instances.append(build_hosting(engine, runtimes, tmp_path / name / "endpoints", limits, leases))
    yield instances
    for instance in instances:
        instance.keeper.shutdown()
        instance.keeper.leases.stop()


@pytest.fixture
def instances(engine: Engine, tmp_path: Path, templates_dir: Path, count_template: str) -> Iterator[list[Hosting]]:
    """Instances a and b: the count template in the catalog, idle endpoints stopped after 4 s."""
    index_templates(engine, [templates_dir])
    with two_instances(engine, tmp_path, EndpointLimits(idle_timeout_s=IDLE_S)) as both:
        yield both


def running(manager: EndpointManager, environment: str) -> str:
    launched = manager.launch(LaunchRequest(environment=environment), ANONYMOUS)
    wait_until(lambda: manager.get(launched.id).status != EndpointStatus.STARTING, timeout_s=60)
    assert manager.get(launched.id).status == EndpointStatus.RUNNING, manager.get(launched.id).message
    return launched.id


def test_an_instance_leaves_a_live_ones_endpoints_alone_and_its_sessions_keep_them_awake(
    instances: list[Hosting], count_template: str, engine: Engine, hub: FakeHub
) -> None:
    (a, a_keeper), (_, b_keeper) = [(i.endpoints, i.keeper) for i in instances]
    endpoint_id = running(a, count_template)
    assert a.get(endpoint_id).instance == a.instance

    b_keeper.reconcile()
    b_keeper.watch()
    b_keeper.check_soon(endpoint_id)  # as b's gateway does when it cannot reach an endpoint
    assert a.get(endpoint_id).status == EndpointStatus.RUNNING
    assert server_pids(endpoint_id)

    # b's gateway holds a session open well past a's idle limit: a's watch sees it through the row.
    instances[1].traffic.of(endpoint_id).session_opened()
    opened = time.monotonic()

    def kept_awake_past_the_idle_limit() -> bool:
        b_keeper.watch()
        a_keeper.watch()
        assert a.get(endpoint_id).status == EndpointStatus.RUNNING
        return time.monotonic() - opened > 2 * IDLE_S

    wait_until(kept_awake_past_the_idle_limit, timeout_s=4 * IDLE_S, interval_s=0.5)
    instances[1].traffic.of(endpoint_id).session_closed()
    b_keeper.watch()

    def stopped_when_idle() -> bool:
        a_keeper.watch()
        return a.get(endpoint_id).status == EndpointStatus.STOPPED

    wait_until(stopped_when_idle, timeout_s=15)
    assert a.get(endpoint_id).reason == "idle_stopped"

    guard = OutboundGuard(allow_private=True)
    for instance in instances:
        HealthMonitor(engine, HubClient(hub.url), instance.endpoints, instance.keeper.leases, guard)._targets()
    assert {i.keeper.leases.holds(HEALTH_LEASE) for i in instances} == {True, False}


def waiting_for(engine: Engine, key: int) -> int:
    """How many Postgres sessions wait for the advisory lock on key."""
    with engine.connect() as connection:
        query = text(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND classid = :high AND objid = :low"
        )
        waiting: int = connection.execute(query, {"high": key >> 32, "low": key & 0xFFFFFFFF}).scalar_one()
    return waiting


def test_launches_through_two_instances_at_once_keep_the_limit(
    engine: Engine, tmp_path: Path, templates_dir: Path, count_template: str
) -> None:
    index_templates(engine, [templates_dir])
    with two_instances(engine, tmp_path, EndpointLimits(total=1, idle_timeout_s=60)) as instances:
        launch_both([i.endpoints for i in instances], count_template, engine)


def launch_both(managers: list[EndpointManager], count_template: str, engine: Engine) -> None:
    outcomes: list[str] = []

    def launch(manager: EndpointManager) -> None:
        try:
            outcomes.append(manager.launch(LaunchRequest(environment=count_template), ANONYMOUS).id)
        except TooManyRequestsError as exc:
            outcomes.append(exc.message)

    threads = [threading.Thread(target=launch, args=(manager,)) for manager in managers]
    with exclusive(engine, LIMITS_LOCK):  # both instances count the endpoints only once this ends
        for thread in threads:
            thread.start()
        if engine.dialect.name == "postgresql":  # SQLite shows no waiters; there both wait for its write lock
            wait_until(lambda: waiting_for(engine, LIMITS_LOCK) == 2, timeout_s=20)
    for thread in threads:
        thread.join(timeout=30)

    refused = [o for o in outcomes if "at most 1 endpoints" in o]
    assert len(outcomes) == 2 and len(refused) == 1, outcomes
    launched = next(o for o in outcomes if o not in refused)
    assert [e.id for e in managers[0].list(active_only=True)] == [launched]
    wait_until(lambda: managers[0].get(launched).status != EndpointStatus.STARTING, timeout_s=60)


def test_the_endpoints_of_an_instance_that_died_start_again_on_another_under_their_id(
    instances: list[Hosting], count_template: str
) -> None:
    (a, _), (b, b_keeper) = [(i.endpoints, i.keeper) for i in instances]
    endpoint_id = running(a, count_template)
    instances[0].keeper.leases.stop()  # a is gone as far as the database can tell; its server still runs

    b_keeper.watch()

    assert b.get(endpoint_id).instance == b.instance
    wait_until(lambda: b.get(endpoint_id).status == EndpointStatus.RUNNING, timeout_s=60)
    assert [(r.id, r.status) for r in b.replicas(endpoint_id, live_only=False)] == [
        (endpoint_id, ReplicaStatus.STOPPED),  # a's server, which b could not watch, is stopped
        (f"{endpoint_id}-2", ReplicaStatus.READY),
    ]
    wait_until(lambda: not server_pids(endpoint_id), timeout_s=10)
    assert server_pids(f"{endpoint_id}-2")


# -- two processes


class Instance(Server):
    """`python -m app serve` as one instance."""

    def get(self, path: str) -> Any:
        return httpx.get(f"{self.url}{path}", timeout=30).json()

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", timeout=60, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, **kwargs)

    def wait_healthy(self) -> "Instance":
        wait_until(self.healthy, timeout_s=STARTUP_S)
        return self


def instance_env(settings: Settings, tmp_path: Path, name: str, **values: str) -> dict[str, str]:
    """The environment of one instance's process: the test's database, its own data folder, short leases."""
    env = cli_env(tmp_path, settings.hf_endpoint) | {
        "ENVHUB_DATABASE_URL": settings.database_url,
        "ENVHUB_DATA_DIR": str(tmp_path / name),
        "ENVHUB_TEMPLATES_DIR": str(settings.templates_dir),
        "ENVHUB_ADMIN_TOKEN": ADMIN_TOKEN,
        "ENVHUB_HEALTH_INTERVAL_S": "0",
        "ENVHUB_LEASE_TTL_S": "3",
        "ENVHUB_UI": "false",  # instances carrying sessions, reached through their API and gateway
    }
    return env | {f"ENVHUB_{key.upper()}": value for key, value in values.items()}


@pytest.mark.databases("postgres")
@pytest.mark.timeout(600)
def test_a_sync_and_an_endpoint_of_one_instance_serve_through_the_other(
    settings: Settings, tmp_path: Path, hub: FakeHub, count_template: str
) -> None:
    hub.add_space("alice/chess", files=space_files("Chess"))
    a = Instance(instance_env(settings, tmp_path, "a", sync_interval_s="0", hub_timeout_s="120"))
    b: Instance | None = None
    try:
        started = time.monotonic()
        a.wait_healthy()
        startup_s = time.monotonic() - started
        launched = a.post("/api/endpoints", json={"environment": count_template}).json()
        wait_until(lambda: a.get(f"/api/endpoints/{launched['id']}")["status"] != "starting", timeout_s=60)
        assert a.get(f"/api/endpoints/{launched['id']}")["status"] == "running"
        # a's sync hangs on the Hub until b has started and looked, so that b starts during it.
        released = threading.Event()
        hub.fail("GET", "/api/spaces", Fault(hang_s=2 * startup_s + 60, released=released))
        sync = a.post("/api/sync").json()
        assert sync["status"] == "running"

        b = Instance(instance_env(settings, tmp_path, "b", sync_interval_s="0")).wait_healthy()
        wait_until(lambda: b.get("/api/health")["endpoints_checked_at"] is not None, timeout_s=30)  # b's watch looked

        # b's start-up left a's sync and a's endpoint as they were.
        assert b.get(f"/api/sync/{sync['id']}")["status"] == "running"
        assert b.post("/api/sync").status_code == 409
        endpoint = b.get(f"/api/endpoints/{launched['id']}")
        assert endpoint["status"] == "running", endpoint["message"]
        health = b.get("/api/health")
        assert sorted(health["instances"]) == sorted([health["instance"], a.get("/api/health")["instance"]])
        assert health["sync_running"] is True

        # The endpoint a launched plays through b's gateway URL.
        with GenericEnvClient(base_url=f"{b.url}/endpoints/{launched['id']}").sync() as client:
            assert client.reset().observation["total"] == 0
            assert client.step({"add": 4}).observation["total"] == 4
        assert httpx.get(f"{b.url}/endpoints/{launched['id']}/health").json() == {"status": "healthy"}

        # a's sync, once done, is what b serves.
        released.set()
        wait_until(lambda: b.get(f"/api/sync/{sync['id']}")["status"] != "running", timeout_s=2 * STARTUP_S + 30)
        assert b.get(f"/api/sync/{sync['id']}")["status"] == "ok"
        assert [e["id"] for e in b.get("/api/environments?q=chess")["data"]] == ["alice/chess"]

        # Stopped through b, a's server goes (same machine: b stops it; elsewhere a would).
        stopped = httpx.delete(f"{b.url}/api/endpoints/{launched['id']}", timeout=30).json()
        assert stopped["status"] == "stopped"
        wait_until(lambda: not server_pids(launched["id"]), timeout_s=10)
        assert a.get(f"/api/endpoints/{launched['id']}")["status"] == "stopped"
        assert not any("Traceback" in line for line in a.lines + b.lines)
    finally:
        for instance in (b, a):
            if instance is not None:
                instance.stop()


@pytest.mark.timeout(400)
@pytest.mark.slow  # the sync's lease moving on; leases taken over: test_the_endpoints_of_an_instance_that_died_...
def test_when_the_sync_instance_dies_another_takes_over(
    settings: Settings, tmp_path: Path, hub: FakeHub, count_template: str
) -> None:
    hub.add_space("alice/chess", files=space_files("Chess"))
    a = Instance(instance_env(settings, tmp_path, "a", sync_interval_s="2"))
    b: Instance | None = None
    launched: dict[str, Any] = {}
    try:
        a.wait_healthy()
        a_id = a.get("/api/health")["instance"]
        wait_until(lambda: a.get("/api/health")["leases"].get("sync") == a_id, timeout_s=30)
        launched = a.post("/api/endpoints", json={"environment": count_template}).json()
        wait_until(lambda: a.get(f"/api/endpoints/{launched['id']}")["status"] == "running", timeout_s=60)
        b = Instance(instance_env(settings, tmp_path, "b", sync_interval_s="2")).wait_healthy()
        b_id = b.get("/api/health")["instance"]
        wait_until(lambda: len(b.get("/api/sync")["data"]) >= 2, timeout_s=30)  # due every 2 s
        assert b.get("/api/health")["leases"]["sync"] == a_id
        assert {r["instance"] for r in b.get("/api/sync")["data"]} == {a_id}  # only a ran them

        a.process.send_signal(signal.SIGKILL)  # no shutdown: no lease given back, a's server left running
        a.process.wait()

        wait_until(lambda: b.get("/api/health")["leases"].get("sync") == b_id, timeout_s=15)
        wait_until(lambda: b.get("/api/sync")["data"][0]["instance"] == b_id, timeout_s=15)
        assert b.get("/api/health")["instances"] == [b_id]

        # b's next look at the endpoints (every 2 s) finds a's instance gone, stops its server and starts the
        # endpoint again under its id.
        def started_again() -> bool:
            endpoint = b.get(f"/api/endpoints/{launched['id']}")
            ready = [r["id"] for r in endpoint["pool"]["replicas"] if r["status"] == "ready"]
            return bool(endpoint["status"] == "running" and ready == [f"{launched['id']}-2"])

        wait_until(started_again, timeout_s=60)
        wait_until(lambda: not server_pids(launched["id"]), timeout_s=10)
        with GenericEnvClient(base_url=f"{b.url}/endpoints/{launched['id']}").sync() as client:
            assert client.reset().observation["total"] == 0
    finally:
        for instance in (b, a):
            if instance is not None:
                instance.stop()
        for pid in server_pids(launched.get("id", "")) if launched else []:
            os.kill(pid, signal.SIGKILL)  # a failed run leaves no server of the killed instance behind
