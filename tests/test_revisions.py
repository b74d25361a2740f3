"""Pinned revisions: the catalog keeps every revision it has seen, an id pins one, and an endpoint records the one
it serves and says when the catalog has a newer one; quality reports run by themselves on each new revision."""

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from app.settings import Settings
from catalog.templates import index_templates
from core.db import create_db_engine
from tests.conftest import ADMIN_TOKEN, readme, space_files, wait_until
from tests.fakehub import FakeHub
from tests.serving import Envhub

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def _sync(http: TestClient | Any) -> None:
    response = http.post("/api/sync?wait=true", headers=ADMIN)
    assert response.status_code in (200, 202), response.text


def test_the_catalog_keeps_every_revision_it_saw_and_a_prefix_pins_one(client: TestClient, hub: FakeHub) -> None:
    hub.add_space("alice/count", files=space_files("Count"))
    _sync(client)
    first = client.get("/api/environments/alice/count").json()["sha"]
    hub.update_space("alice/count", files={"README.md": readme("title: Count\ntags: [openenv]", "# Count, again\n")})
    _sync(client)
    second = client.get("/api/environments/alice/count").json()["sha"]
    assert first != second

    revisions = client.get("/api/environments/alice/count/revisions").json()
    assert revisions["current"] == second
    assert [(r["revision"], r["current"]) for r in revisions["data"]] == [(second, True), (first, False)]

    pinned = client.get(f"/api/environments/alice/count@{first[:7]}").json()
    assert (pinned["id"], pinned["sha"], pinned["latest"]) == ("alice/count", first, second)
    assert client.get(f"/api/environments/alice/count@{second[:7]}").json()["latest"] is None
    # The leaderboard of a pinned id is the environment's own, grouped by revision.
    assert client.get(f"/api/environments/alice/count@{first[:7]}/leaderboard").status_code == 200


def test_a_pin_that_names_no_revision_says_which_there_are(client: TestClient, hub: FakeHub) -> None:
    hub.add_space("alice/count", files=space_files("Count"))
    _sync(client)
    sha = client.get("/api/environments/alice/count").json()["sha"]

    short = client.get("/api/environments/alice/count@abc")
    assert (short.status_code, short.json()["code"]) == (422, "revision_malformed")
    unknown = client.get("/api/environments/alice/count@0000000")
    assert (unknown.status_code, unknown.json()["code"]) == (404, "not_found")
    assert sha[:12] in unknown.json()["detail"]  # the revisions there are, named


def test_an_endpoint_records_its_template_revision_and_says_when_the_folder_changed(
    envhub: Envhub, count_template: str, templates_dir: Path
) -> None:
    digest = envhub.http.get(f"/api/environments/{count_template}").json()["sha"]
    endpoint = envhub.running(f"{count_template}@{digest[:8]}")
    assert (endpoint["environment"], endpoint["revision"], endpoint["latest"]) == (count_template, digest, None)

    # The folder changes and is indexed again (as at the next start): the endpoint keeps its revision, and says
    # the catalog has a newer one; the old revision can no longer be launched.
    (templates_dir / "count" / "README.md").write_text(readme("title: Count\ntags: [openenv]", "# Count, v2\n"))
    engine = create_db_engine(envhub.settings.database_url)
    try:
        index_templates(engine, [templates_dir])
    finally:
        engine.dispose()
    newer = envhub.http.get(f"/api/environments/{count_template}").json()["sha"]
    assert newer != digest
    again = envhub.endpoint(endpoint["id"])
    assert (again["revision"], again["latest"]) == (digest, newer)

    gone = envhub.http.post("/api/endpoints", json={"environment": f"{count_template}@{digest[:8]}"})
    assert (gone.status_code, gone.json()["code"]) == (422, "invalid_input")


def test_the_space_backend_refuses_an_older_revision_of_a_space(envhub: Envhub, hub: FakeHub) -> None:
    hub.add_space("alice/count", files=space_files("Count"))
    _sync(envhub.http)
    first = envhub.http.get("/api/environments/alice/count").json()["sha"]
    hub.update_space("alice/count", files={"README.md": readme("title: Count\ntags: [openenv]", "# Count, again\n")})
    _sync(envhub.http)

    refused = envhub.http.post("/api/endpoints", json={"environment": f"alice/count@{first[:7]}", "backend": "space"})
    assert (refused.status_code, refused.json()["code"]) == (422, "invalid_input")


def test_quality_reports_run_by_themselves_on_each_new_revision(
    settings: Settings, tmp_path: Path, count_template: str, hub: FakeHub, space_app: str
) -> None:
    hub.add_space("alice/count", files=space_files("Count"))
    hub.set_host("alice/count", space_app)
    rounds = settings.model_copy(
        update={
            "data_dir": tmp_path / "data",
            "quality_interval_s": 1,
            "health_interval_s": 2,  # the monitor learns where the Space runs, and sees it up
            "allow_private_urls": True,
        }
    )
    envhub = Envhub(rounds)
    try:
        _sync(envhub.http)
        space_sha = envhub.http.get("/api/environments/alice/count").json()["sha"]
        endpoint = envhub.running(count_template)

        def reports(environment: str) -> list[dict[str, Any]]:
            found = envhub.http.get("/api/checks", params={"environment": environment, "suite": "quality"})
            data: list[dict[str, Any]] = found.json()["data"]
            return data

        wait_until(lambda: bool(reports(count_template)) and bool(reports("alice/count")), timeout_s=90)
        (of_endpoint,) = reports(count_template)
        assert (of_endpoint["endpoint"], of_endpoint["revision"]) == (endpoint["id"], endpoint["revision"])
        (of_space,) = reports("alice/count")
        assert of_space["revision"] == space_sha
        detail = envhub.http.get("/api/environments/alice/count").json()
        assert detail["quality"]["revision"] == space_sha
    finally:
        envhub.stop()
