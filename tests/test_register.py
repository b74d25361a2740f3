"""Registering self-hosted endpoints by URL, waking Spaces, and the conforms/up filters of search."""

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from conformance.register import url_environment_id
from tests import checkservers
from tests.checkservers import Served, counting, serve
from tests.conftest import ADMIN_TOKEN, space_files, wait_until
from tests.fakehub import FakeHub

pytestmark = pytest.mark.databases


@pytest.fixture
def local_client(settings: Settings, count_template: str) -> Iterator[TestClient]:
    local = settings.model_copy(update={"allow_private_urls": True})
    with TestClient(create_app(local)) as test_client:
        yield test_client


@pytest.fixture
def count_server() -> Iterator[Served]:
    with serve(checkservers.count_app(environment=checkservers.TaskCountEnvironment)) as served:
        yield served


def test_a_conforming_url_is_registered(local_client: TestClient, count_server: Served) -> None:
    response = local_client.post("/api/environments", json={"url": count_server.url + "/"})
    assert response.status_code == 201, response.text
    environment = response.json()
    assert environment["id"] == f"url:127.0.0.1:{count_server.port}"
    assert (environment["source"], environment["title"], environment["host"]) == (
        "url",
        "TaskCountEnvironment",
        count_server.url,
    )
    assert environment["health"]["status"] == "up"
    assert environment["conformance"]["conforms"] is True
    assert environment["env_schema"]["action"]["properties"]["add"]["maximum"] == 10
    assert environment["tasks"]["splits"][0]["num_tasks"] == 3

    reports = local_client.get("/api/checks", params={"environment": environment["id"]}).json()
    assert reports["count"] == 1
    assert environment["conformance"]["report_id"] == reports["data"][0]["id"]

    again = local_client.post("/api/environments", json={"url": count_server.url})
    assert again.status_code == 200
    assert local_client.get("/api/checks", params={"environment": environment["id"]}).json()["count"] == 2
    found = local_client.get("/api/environments", params={"source": "url", "q": "TaskCountEnvironment"}).json()
    assert [e["id"] for e in found["data"]] == [environment["id"]]


def test_a_url_that_fails_core_checks_is_not_registered(local_client: TestClient) -> None:
    with serve(checkservers.wrong_health()) as served:
        response = local_client.post("/api/environments", json={"url": served.url})
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "non_conforming"
    assert body["failing"] == [
        {
            "id": "1",
            "title": 'GET /health answers 200 {"status": "healthy"}',
            "result": "fail",
            "message": 'GET /health answered {"status": "ok"}, not {"status": "healthy"}',
        }
    ]
    stored = local_client.get(f"/api/checks/{body['report_id']}").json()
    assert stored["conforms"] is False
    assert local_client.get("/api/environments", params={"source": "url"}).json()["count"] == 0


def test_registering_a_private_url_is_refused_when_hosted(client: TestClient, count_server: Served) -> None:
    response = client.post("/api/environments", json={"url": count_server.url})
    assert response.status_code == 422
    assert "loopback" in response.json()["detail"]
    assert client.post("/api/environments", json={"url": "gopher://x"}).status_code == 422


def test_search_filters_conforming_and_up_environments(local_client: TestClient, count_server: Served) -> None:
    registered = local_client.post("/api/environments", json={"url": count_server.url}).json()
    everything = local_client.get("/api/environments").json()
    assert {e["id"] for e in everything["data"]} == {registered["id"], "template:count"}
    for flag in ("conforms", "up"):
        found = local_client.get("/api/environments", params={flag: True}).json()
        assert [e["id"] for e in found["data"]] == [registered["id"]], flag
    listed = next(e for e in everything["data"] if e["id"] == registered["id"])
    assert listed["health"]["status"] == "up"
    assert listed["conformance"]["core_passed"] == listed["conformance"]["core_total"]
    assert "samples" not in listed["health"]


def test_waking_a_sleeping_space_through_the_api(settings: Settings, hub: FakeHub) -> None:
    hub.add_space("alice/count", files=space_files("Count"))
    app, seen = counting(checkservers.count_app())
    with serve(app) as served, TestClient(create_app(settings.model_copy(update={"allow_private_urls": True}))) as api:
        hub.set_host("alice/count", served.url)
        hub.set_stage("alice/count", "SLEEPING")
        api.post("/api/sync", params={"wait": True}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        response = api.post("/api/environments/alice/count/wake")
        assert response.status_code == 202
        assert (response.json()["status"], response.json()["reason"]) == ("building", "waking")

        def awake() -> bool:
            health = api.get("/api/environments/alice/count").json()["health"]
            return bool(health["status"] == "up")

        wait_until(awake, timeout_s=15)
        health = api.get("/api/environments/alice/count").json()["health"]
    assert health["cold_start_s"] is not None
    assert seen[0] == "/health"


def test_only_what_runs_somewhere_can_be_woken(count_template: str, client: TestClient) -> None:
    assert client.post("/api/environments/nobody/nothing/wake").status_code == 404
    response = client.post(f"/api/environments/{count_template}/wake")
    assert response.status_code == 422


@pytest.mark.parametrize(
    ("url", "environment_id"),
    [
        ("http://127.0.0.1:8000", "url:127.0.0.1:8000"),
        ("https://Env.Example.org", "url:env.example.org:443"),
        ("http://example.org/envs/chess/", "url:example.org:80/envs/chess"),
        ("http://[::1]:9000", "url:[::1]:9000"),
    ],
)
def test_url_environment_ids(url: str, environment_id: str) -> None:
    assert url_environment_id(url) == environment_id
