"""POST /api/checks and the stored reports: URLs, envhub's own endpoints, refusals and limits."""

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, create_engine

from app.main import create_app
from app.settings import Settings
from conformance.models import CheckReport
from tests import checkservers
from tests.checkservers import Served, serve
from tests.serving import Envhub


@pytest.fixture
def local_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"allow_private_urls": True, "check_timeout_s": 2})


@pytest.fixture
def local_client(local_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(local_settings)) as test_client:
        yield test_client


@pytest.fixture
def count_server() -> Iterator[Served]:
    with serve(checkservers.count_app()) as served:
        yield served


def test_checking_a_url_files_a_report(local_client: TestClient, count_server: Served) -> None:
    response = local_client.post("/api/checks", json={"url": count_server.url + "/"})
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["url"], body["conforms"], body["environment"], body["endpoint"]) == (
        count_server.url,
        True,
        None,
        None,
    )
    assert body["core_passed"] == body["core_total"]
    assert (body["verdict"], body["report"]["verdict"]) == ("pass", "pass")
    assert body["report"]["results"][0]["measured"]["exchanges"][0]["sent"] == "GET /health"

    again = local_client.get(f"/api/checks/{body['id']}")
    assert again.json() == body
    listed = local_client.get("/api/checks").json()
    assert (listed["count"], listed["data"][0]["id"]) == (1, body["id"])


def test_a_private_url_is_refused_in_the_hosted_configuration(client: TestClient, count_server: Served) -> None:
    response = client.post("/api/checks", json={"url": count_server.url})
    assert response.status_code == 422
    assert response.json() == {
        "detail": f"refused {count_server.url}: 127.0.0.1:{count_server.port} is a loopback address; "
        "set ENVHUB_ALLOW_PRIVATE_URLS=true to allow such addresses",
        "code": "refused_url",
    }
    for url, why in (
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
        ("http://localhost:8000", "localhost resolves to"),
        ("http://10.0.0.8:8000", "private address"),
        ("ftp://example.org", "only http:// and https://"),
    ):
        refused = client.post("/api/checks", json={"url": url})
        assert (refused.status_code, refused.json()["code"]) == (422, "refused_url"), why
    assert client.get("/api/checks").json()["count"] == 0


def test_the_request_names_exactly_one_target(client: TestClient) -> None:
    for body in ({}, {"url": "http://example.org", "endpoint": "abc"}, {"url": "http://example.org", "x": 1}):
        response = client.post("/api/checks", json=body)
        assert response.status_code == 422
        assert isinstance(response.json()["detail"], str)
    assert client.post("/api/checks", json={"endpoint": "nope"}).status_code == 404
    missing = client.post("/api/checks", json={"environment": "nobody/nothing"})
    assert missing.status_code == 404


def test_a_template_cannot_be_checked_until_launched(count_template: str, client: TestClient) -> None:
    response = client.post("/api/checks", json={"environment": count_template})
    assert (response.status_code, response.json()["code"]) == (422, "not_launched")


def test_envhubs_own_endpoints_are_checked_through_the_gateway(envhub: Envhub, count_template: str) -> None:
    # The hosted configuration (no private URLs), yet envhub's own gateway is reachable on loopback.
    endpoint = envhub.running(count_template)
    by_id = envhub.http.post("/api/checks", json={"endpoint": endpoint["id"]}, timeout=60)
    assert by_id.status_code == 201, by_id.text
    by_url = envhub.http.post("/api/checks", json={"url": endpoint["url"]}, timeout=60)
    assert by_url.status_code == 201, by_url.text
    for report in (by_id.json(), by_url.json()):
        assert report["conforms"], report["report"]["failing"]
        assert (report["environment"], report["endpoint"]) == (count_template, endpoint["id"])
        assert report["url"] == f"{envhub.url}/endpoints/{endpoint['id']}"

    listed = envhub.http.get("/api/checks", params={"endpoint": endpoint["id"]}).json()
    assert [r["id"] for r in listed["data"]] == [by_url.json()["id"], by_id.json()["id"]]  # newest first
    assert envhub.http.get("/api/checks", params={"environment": count_template}).json()["count"] == 2

    summary = envhub.endpoint(endpoint["id"])["conformance"]
    assert summary["conforms"] is True
    assert summary["report_id"] == by_url.json()["id"]
    assert summary["core_passed"] == summary["core_total"] > 20
    environment = envhub.http.get(f"/api/environments/{count_template}").json()
    assert environment["conformance"]["report_id"] == by_url.json()["id"]

    # Other paths of envhub itself are not an endpoint, and stay refused.
    refused = envhub.http.post("/api/checks", json={"url": f"{envhub.url}/api"})
    assert (refused.status_code, refused.json()["code"]) == (422, "refused_url")


def test_a_stopped_endpoint_is_not_checked(envhub: Envhub, count_template: str) -> None:
    endpoint = envhub.running(count_template)
    envhub.http.delete(f"/api/endpoints/{endpoint['id']}")
    response = envhub.http.post("/api/checks", json={"endpoint": endpoint["id"]})
    assert (response.status_code, response.json()["code"]) == (409, "conflict")


def test_checks_running_at_once_are_limited(local_settings: Settings) -> None:
    settings = local_settings.model_copy(update={"max_concurrent_checks": 1})
    waiting = threading.Event()
    with serve(checkservers.ws_silent(waiting)) as slow, TestClient(create_app(settings)) as test_client:
        first: dict[str, Any] = {}
        runner = threading.Thread(
            target=lambda: first.update(response=test_client.post("/api/checks", json={"url": slow.url}))
        )
        runner.start()
        assert waiting.wait(timeout=30), "the first check never opened the silent WebSocket"
        second = test_client.post("/api/checks", json={"url": slow.url})
        runner.join(timeout=30)
    assert (second.status_code, second.json()["code"]) == (429, "checks_at_once")
    assert first["response"].status_code == 201
    assert first["response"].json()["conforms"] is False


def test_a_web_ui_is_checked_without_disturbing_it(envhub: Envhub, count_template: str) -> None:
    endpoint = envhub.running(count_template, options={"env": {"ENABLE_WEB_INTERFACE": "true"}})
    response = envhub.http.post("/api/checks", json={"endpoint": endpoint["id"]}, timeout=60)
    report = response.json()["report"]
    assert report["verdict"] != "fail", report["failing"]
    assert report["profile"]["web_ui"] is True
    results = {c["check_id"]: c for c in report["results"]}
    assert (results["37"]["status"], results["38"]["status"]) == ("pass", "pass")
    assert all(
        not e["sent"].startswith(("POST /web/reset", "POST /web/step")) for e in results["38"]["measured"]["exchanges"]
    )


OLD_PROTOCOL = {  # a protocol report as envhub stored it before the engine was one
    "url": "http://old.test:8000",
    "checked_at": "2025-01-02T03:04:05Z",
    "seconds": 1.5,
    "profile": {"mode": "simulation", "generation": "older", "web_ui": False},
    "checks": [
        {"id": "1", "title": "GET /health", "level": "core", "result": "pass", "message": "",
         "evidence": [{"sent": "GET /health", "received": 'HTTP 200 {"status": "healthy"}'}], "duration_ms": 12.5},
        {"id": "16", "title": "state echoes", "level": "warn", "result": "fail", "message": "no echo",
         "evidence": [], "duration_ms": 3},
    ],
    "conforms": True, "core_passed": 1, "core_total": 1, "failing": [], "warnings": ["16"],
}  # fmt: skip
OLD_QUALITY = {  # a quality report as envhub stored it before the engine was one
    "suite": "quality",
    "target": "http://old.test:8000",
    "environment": None,
    "revision": "abc",
    "checked_at": "2025-01-02T03:04:05Z",
    "duration_s": 4.0,
    "results": [
        {"check_id": "runtime.seed_control", "status": "pass", "measured": {}, "evidence": ["same"],
         "remediation": None, "duration_s": 0.1},
        {"check_id": "semantic.trivial_policy_floor", "status": "fail", "measured": {}, "evidence": ["half way"],
         "remediation": "fix it", "duration_s": 0.2},
    ],
    "severities": {"runtime.seed_control": "fail", "semantic.trivial_policy_floor": "warn"},
    "figures": {"capacity": 4, "capacity_reached": True},
    "verdict": "warn",
}  # fmt: skip


def test_reports_stored_before_read_as_one_report_type(local_client: TestClient, local_settings: Settings) -> None:
    engine = create_engine(local_settings.database_url)
    with Session(engine) as session:
        rows = [
            CheckReport(url="http://old.test:8000", verdict="pass", conforms=True, core_passed=1, core_total=1,
                        report=OLD_PROTOCOL),
            CheckReport(url="http://old.test:8000", suite="quality", verdict="warn", revision="abc",
                        report=OLD_QUALITY),
        ]  # fmt: skip
        session.add_all(rows)
        session.commit()
        ids = [row.id for row in rows]
    engine.dispose()
    protocol = local_client.get(f"/api/checks/{ids[0]}")
    assert protocol.status_code == 200, protocol.text
    report = protocol.json()["report"]
    assert (report["suite"], report["target"], report["duration_s"], report["verdict"]) == (
        "protocol", "http://old.test:8000", 1.5, "warn",
    )  # fmt: skip
    health, echo = report["results"]
    assert (health["check_id"], health["status"], health["severity"], health["duration_s"]) == (
        "1",
        "pass",
        "fail",
        0.0125,
    )
    assert health["measured"]["exchanges"][0]["sent"] == "GET /health"
    assert (echo["level"], echo["severity"], echo["evidence"]) == ("warn", "warn", ["no echo"])
    quality = local_client.get(f"/api/checks/{ids[1]}").json()["report"]
    assert quality["verdict"] == "warn"  # the floor's failure carried a warn severity
    assert [r["severity"] for r in quality["results"]] == ["fail", "warn"]
    listed = local_client.get("/api/checks", params={"limit": 5}).json()
    assert listed["count"] == 2
