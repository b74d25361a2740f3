"""The health monitor against real servers: endpoints, Hub Spaces (stage from the fake Hub) and URLs."""

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from catalog.health import record
from catalog.hub import HubClient
from catalog.models import Environment, HealthRecord, Source
from catalog.sync import Syncer
from core.leases import Leases
from core.outbound import OutboundGuard
from envclient.health import HealthStatus, Probe
from hosting.assembly import build_hosting
from hosting.limits import EndpointLimits
from hosting.monitor import HealthMonitor
from tests import checkservers
from tests.checkservers import authorizations, counting, serve
from tests.conftest import space_files, wait_until
from tests.fakehub import FakeHub
from tests.serving import Envhub, free_port

SPACE = "alice/count"


@pytest.fixture
def monitor(engine: Engine, hub: FakeHub, tmp_path: Path) -> HealthMonitor:
    leases = Leases(engine)
    endpoints = build_hosting(engine, {}, tmp_path / "endpoints", EndpointLimits(), leases).endpoints
    return HealthMonitor(engine, HubClient(hub.url), endpoints, leases, OutboundGuard(allow_private=True), timeout_s=2)


@pytest.fixture
def space(hub: FakeHub, engine: Engine) -> str:
    """A Space in the catalog, synced from the fake Hub."""
    hub.add_space(SPACE, files=space_files("Count"))
    Syncer(engine, HubClient(hub.url), workers=2).run()
    return SPACE


def health(engine: Engine, environment_id: str) -> dict[str, Any]:
    with Session(engine) as session:
        row = session.get(Environment, environment_id)
        assert row is not None
        return row.health.model_dump(mode="json") if row.health else {}


def round_of(monitor: HealthMonitor) -> None:
    asyncio.run(monitor.run_round())


def test_a_running_space_goes_up_down_and_up_again(
    monitor: HealthMonitor, hub: FakeHub, engine: Engine, space: str
) -> None:
    port = free_port()
    hub.set_host(space, f"http://127.0.0.1:{port}")
    with serve(checkservers.count_app(), port=port):
        round_of(monitor)
        first = health(engine, space)
    assert first["status"] == "up", first
    assert first["health_ms"] > 0
    assert first["reset_ms"] > 0

    round_of(monitor)  # the server is gone
    down = health(engine, space)
    assert down["status"] == "down"
    assert "ConnectError" in down["message"]
    assert down["since"] != first["since"]
    assert down["health_ms"] == first["health_ms"]  # latencies are of answers, not of failures

    with serve(checkservers.count_app(), port=port):
        round_of(monitor)
    again = health(engine, space)
    assert again["status"] == "up"
    assert len(again["samples"]["health"]) == 2

    with Session(engine) as session:
        row = session.get(Environment, space)
        assert row is not None
        assert row.host == f"http://127.0.0.1:{port}"  # the Hub's host, refreshed by the monitor
        assert row.runtime_stage == "RUNNING"
        assert row.env_metadata is not None and row.env_metadata["name"] == "CountEnvironment"
        assert row.env_schema is not None and set(row.env_schema) >= {"action", "observation", "state"}
        assert row.tools == []  # the count environment has no MCP tools
        assert row.tasks is None  # nor task splits


def test_a_sleeping_space_is_not_woken(monitor: HealthMonitor, hub: FakeHub, engine: Engine, space: str) -> None:
    app, seen = counting(checkservers.count_app())
    with serve(app) as served:
        hub.set_host(space, served.url)
        hub.set_stage(space, "SLEEPING")
        round_of(monitor)
        round_of(monitor)
        assert seen == []
    status = health(engine, space)
    assert (status["status"], status["reason"]) == ("sleeping", "hub_stage")


@pytest.mark.parametrize(
    ("stage", "status"),
    [("BUILDING", "building"), ("PAUSED", "sleeping"), ("RUNTIME_ERROR", "error"), ("DELETING", "down")],
)
def test_hub_stages_become_statuses_without_a_request(
    monitor: HealthMonitor, hub: FakeHub, engine: Engine, space: str, stage: str, status: str
) -> None:
    app, seen = counting(checkservers.count_app())
    with serve(app) as served:
        hub.set_host(space, served.url)
        hub.set_stage(space, stage, error_message="exit code 3" if stage == "RUNTIME_ERROR" else None)
        round_of(monitor)
    assert seen == []
    assert (health(engine, space)["status"], health(engine, space)["reason"]) == (status, "hub_stage")
    with Session(engine) as session:
        row = session.get(Environment, space)
        assert row is not None and row.runtime_stage == stage  # which stage the Hub reported
    if stage == "RUNTIME_ERROR":
        assert "exit code 3" in health(engine, space)["message"]  # the Hub's own words for the error, passed on


def test_waking_a_space_on_request_records_its_cold_start(
    monitor: HealthMonitor, hub: FakeHub, engine: Engine, space: str
) -> None:
    app, seen = counting(checkservers.count_app())
    with serve(app) as served:
        hub.set_host(space, served.url)
        hub.set_stage(space, "SLEEPING")
        round_of(monitor)
        assert seen == []

        async def wake() -> dict[str, Any]:
            waking = await monitor.spaces.wake(space)
            assert (waking.status, waking.reason) == (HealthStatus.BUILDING, "waking")
            await asyncio.wait_for(asyncio.gather(*monitor.spaces._wakes.values()), 10)
            return health(engine, space)

        woken = asyncio.run(wake())
    assert (woken["status"], woken["reason"]) == ("up", "health_ok"), woken
    assert woken["cold_start_s"] is not None and woken["cold_start_s"] >= 0
    assert "waking_since" not in woken
    assert seen[0] == "/health"


def test_an_unhealthy_answer_is_an_error(monitor: HealthMonitor, hub: FakeHub, engine: Engine, space: str) -> None:
    with serve(checkservers.wrong_health()) as served:
        hub.set_host(space, served.url)
        round_of(monitor)
    status = health(engine, space)
    assert (status["status"], status["reason"]) == ("error", "bad_health_answer")
    assert '{"status":"ok"}' in status["message"]  # what the server answered, as a person reads it


def test_registered_urls_are_probed_and_task_splits_cached(monitor: HealthMonitor, engine: Engine) -> None:
    app = checkservers.count_app(environment=checkservers.TaskCountEnvironment)
    with serve(app) as served, Session(engine) as session:
        session.add(Environment(id="url:somewhere", source=Source.URL, title="count", host=served.url))
        session.commit()
        round_of(monitor)
    assert health(engine, "url:somewhere")["status"] == "up"
    with Session(engine) as session:
        row = session.get(Environment, "url:somewhere")
        assert row is not None
        first = [{"target": 5}, {"target": 10}, {"target": 20}]
        split = {"name": "train", "type": "train", "num_tasks": 3, "first": first}
        assert row.tasks == {"env_name": "count", "splits": [split]}


def test_a_private_url_is_not_probed_in_the_hosted_configuration(engine: Engine, hub: FakeHub, tmp_path: Path) -> None:
    leases = Leases(engine)
    endpoints = build_hosting(engine, {}, tmp_path / "endpoints", EndpointLimits(), leases).endpoints
    hosted = HealthMonitor(engine, HubClient(hub.url), endpoints, leases, OutboundGuard(), timeout_s=2)
    app, seen = counting(checkservers.count_app())
    with serve(app) as served, Session(engine) as session:
        session.add(Environment(id="url:private", source=Source.URL, title="count", host=served.url))
        session.commit()
        round_of(hosted)
        assert seen == []
    status = health(engine, "url:private")
    assert status["status"] == "error"
    assert "loopback" in status["message"]


TOKEN = "hf_test_secret"


async def loopback_dns(host: str, port: int) -> list[str]:
    """Every name resolves to the test's servers on loopback."""
    return ["127.0.0.1"]


@pytest.mark.parametrize("private", [True, False])
def test_a_private_space_is_probed_with_a_key_of_its_own_never_the_hub_token(
    engine: Engine, hub: FakeHub, tmp_path: Path, private: bool
) -> None:
    hub.users[TOKEN] = SPACE.split("/")[0]
    hub.add_space(SPACE, files=space_files("Count"), private=private)
    Syncer(engine, HubClient(hub.url), workers=2).run()
    leases = Leases(engine)
    endpoints = build_hosting(engine, {}, tmp_path / "endpoints", EndpointLimits(), leases).endpoints
    guard = OutboundGuard(allow_private=True, resolver=loopback_dns)
    monitor = HealthMonitor(engine, HubClient(hub.url), endpoints, leases, guard, timeout_s=2, hub_token=TOKEN)
    app, seen = authorizations(checkservers.count_app())
    with serve(app) as served:
        hub.set_host(SPACE, f"http://alice-count.hf.space:{served.port}")
        round_of(monitor)
    assert health(engine, SPACE)["status"] == "up"
    assert {host for host, _, _ in seen} == {f"alice-count.hf.space:{served.port}"}
    keys = {auth for _, _, auth in seen}
    assert all(TOKEN not in (key or "") for key in keys)
    if private:  # the Space's JWT, which the Hub issued for it alone
        assert len(keys) == 1 and hub.space_jwts[str(next(iter(keys))).removeprefix("Bearer ")] == SPACE
    else:
        assert keys == {None}


def test_the_median_of_recent_probes_is_shown() -> None:
    state: HealthRecord | None = None
    for ms in (10.0, 30.0, 20.0, 1000.0, 25.0):
        state = record(state, Probe(HealthStatus.UP, health_ms=ms, reset_ms=ms * 2))
    assert state is not None
    assert (state.health_ms, state.reset_ms) == (25.0, 50.0)
    for _ in range(20):
        state = record(state, Probe(HealthStatus.UP, health_ms=5.0))
    assert len(state.samples["health"]) == 10
    assert state.health_ms == 5.0


@pytest.fixture
def running(envhub: Envhub, count_template: str) -> dict[str, Any]:
    return envhub.running(count_template)


def test_launched_endpoints_are_probed_and_their_environment_cached(
    envhub: Envhub, running: dict[str, Any], count_template: str
) -> None:
    app_monitor: HealthMonitor = envhub.server.config.app.state.services.monitor  # type: ignore[union-attr]
    asyncio.run(app_monitor.run_round())
    endpoint = envhub.endpoint(running["id"])
    assert endpoint["health"]["status"] == "up"
    assert endpoint["health"]["reset_ms"] > 0
    assert endpoint["health"]["cold_start_s"] > 0  # from launch to running
    assert "samples" not in endpoint["health"]
    environment = envhub.http.get(f"/api/environments/{count_template}").json()
    assert environment["env_schema"]["action"]["properties"]["add"]["maximum"] == 10
    assert environment["env_metadata"]["name"] == "CountEnvironment"
    assert environment["health"] is None  # a template runs nowhere by itself
    # the probes went straight to the server, so they do not count as traffic through the gateway
    assert endpoint["stats"]["requests"] == 0


def test_the_monitor_runs_in_the_background(settings: Any, hub: FakeHub, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from app.main import create_app

    hub.add_space(SPACE, files=space_files("Count"))
    with serve(checkservers.count_app()) as served:
        hub.set_host(SPACE, served.url)
        quick = settings.model_copy(update={"health_interval_s": 0.5, "allow_private_urls": True})
        with TestClient(create_app(quick)) as client:
            client.post("/api/sync", params={"wait": True}, headers={"Authorization": "Bearer test-admin-token"})

            def is_up() -> bool:
                found = client.get(f"/api/environments/{SPACE}").json()
                return bool(found.get("health") and found["health"]["status"] == "up")

            wait_until(is_up, timeout_s=15)
            listed = client.get("/api/environments").json()["data"]
    assert [e["health"]["status"] for e in listed if e["id"] == SPACE] == ["up"]
