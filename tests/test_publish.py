"""Deploy as Space: a template becomes a Space in the signed-in user's namespace, made with their token,
followed through its build to running, then checked for conformance."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.settings import Settings
from tests.conftest import ADMIN_TOKEN, space_files, wait_until
from tests.fakehub import FakeHub
from tests.serving import Envhub
from tests.signin import Browsers, csrf, oauth_settings


@pytest.fixture
def oauth_envhub(settings: Settings, tmp_path: Path, count_template: str) -> Iterator[Envhub]:
    server = Envhub(oauth_settings(settings, data_dir=tmp_path / "data", space_poll_s=0.05))
    yield server
    server.stop()


def test_a_template_is_published_to_the_users_namespace_and_followed_to_running(
    oauth_envhub: Envhub, hub: FakeHub, browsers: Browsers, space_app: str, templates_dir: Path
) -> None:
    hub.boot_sequence = ["BUILDING"]  # stays building until the test says otherwise
    bob = browsers.sign_in(oauth_envhub.url, hub, "bob")
    token = hub.oauth.grants[-1].token

    started = bob.post("/api/environments/template:count/publish", json={}, headers=csrf(bob))

    assert started.status_code == 202, started.text
    publication = started.json()
    assert (publication["space"], publication["owner"], publication["status"]) == ("bob/count", "bob", "building")
    assert publication["space_url"] == f"{hub.url}/spaces/bob/count"
    wait_until(lambda: "BUILDING" in bob.get(f"/api/publications/{publication['id']}").json()["message"])
    assert hub.files("bob/count")["models.py"] == (templates_dir / "count" / "models.py").read_bytes()
    assert {(w.user, w.action) for w in hub.writes if w.repo_id == "bob/count"} == {
        ("bob", "create"),
        ("bob", "commit"),
    }
    assert hub.settings("bob/count").sdk == "docker"

    hub.set_host("bob/count", space_app)
    hub.set_stage("bob/count", "RUNNING")
    wait_until(lambda: bob.get(f"/api/publications/{publication['id']}").json()["status"] in ("running", "failed"), 60)

    done = bob.get(f"/api/publications/{publication['id']}").json()
    assert done["status"] == "running", done["message"]
    assert done["url"] == space_app
    assert done["check_id"] is not None and done["conforms"] is not None
    assert done["reason"] == "checked"
    report = bob.get(f"/api/checks/{done['check_id']}").json()
    assert (report["environment"], report["url"]) == ("bob/count", space_app)
    listed = httpx.get(f"{oauth_envhub.url}/api/publications", params={"environment": "template:count"}).json()
    assert [p["id"] for p in listed["data"]] == [publication["id"]]
    assert token not in str(listed) + str(done) + started.text


def test_publishing_needs_a_hub_user_and_a_template(oauth_envhub: Envhub, hub: FakeHub, browsers: Browsers) -> None:
    hub.add_space("openenv/count", files=space_files("Count"))
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    assert httpx.post(f"{oauth_envhub.url}/api/sync?wait=true", headers=admin, timeout=60).json()["added"] == 1
    url = f"{oauth_envhub.url}/api/environments/template:count/publish"

    anonymous = httpx.post(url)
    as_admin = httpx.post(url, headers=admin)
    alice = browsers.sign_in(oauth_envhub.url, hub, "alice")
    no_csrf = alice.post("/api/environments/template:count/publish")
    hub_space = alice.post("/api/environments/openenv/count/publish", headers=csrf(alice))
    bad_name = alice.post("/api/environments/template:count/publish", json={"name": "no/slash"}, headers=csrf(alice))

    assert (anonymous.status_code, anonymous.json()["code"]) == (401, "sign_in_required")
    assert as_admin.status_code == 401
    assert no_csrf.status_code == 403
    assert (hub_space.status_code, hub_space.json()["code"]) == (422, "not_a_template")
    assert bad_name.status_code == 422
    assert not [w for w in hub.writes if w.action == "create"]


def test_a_build_error_is_reported(oauth_envhub: Envhub, hub: FakeHub, browsers: Browsers) -> None:
    hub.boot_sequence = ["BUILDING", "BUILD_ERROR"]
    hub.boot_error_message = "pip install failed"
    alice = browsers.sign_in(oauth_envhub.url, hub, "alice")

    started = alice.post("/api/environments/template:count/publish", json={"name": "counter"}, headers=csrf(alice))

    assert started.json()["space"] == "alice/counter"
    path = f"/api/publications/{started.json()['id']}"
    wait_until(lambda: alice.get(path).json()["status"] == "failed", 30)
    failed = alice.get(path).json()
    assert failed["reason"] == "space_failed"
    assert "BUILD_ERROR: pip install failed" in failed["message"]  # the Hub's stage and its own words, passed on
