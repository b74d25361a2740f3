"""Signed-in users own what they launch: who may stop it, per-user limits, Spaces made with the user's own
token, and that token never showing up in a response, a cookie, the database or the logs."""

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from app.settings import Settings
from tests.conftest import ADMIN_TOKEN, space_files, wait_until
from tests.fakehub import FakeHub
from tests.serving import Envhub
from tests.signin import Browsers, csrf, oauth_settings

COUNT = {"environment": "template:count"}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def oauth_envhub(settings: Settings, data_dir: Path, count_template: str) -> Iterator[Envhub]:
    configured = oauth_settings(
        settings,
        data_dir=data_dir,
        database_url=f"sqlite:///{data_dir / 'envhub.db'}",
        max_endpoints_per_owner=1,
        hf_token=SecretStr("hf_test"),  # the server's own token is alice's; bob's Spaces must not use it
        space_poll_s=0.05,
    )
    server = Envhub(configured)
    yield server
    server.stop()


def test_only_the_owner_or_the_admin_stops_an_endpoint(oauth_envhub: Envhub, hub: FakeHub, browsers: Browsers) -> None:
    alice = browsers.sign_in(oauth_envhub.url, hub, "alice")
    bob = browsers.sign_in(oauth_envhub.url, hub, "bob")
    mine = alice.post("/api/endpoints", json=COUNT, headers=csrf(alice)).json()
    theirs = bob.post("/api/endpoints", json=COUNT, headers=csrf(bob)).json()
    assert (mine["owner"], theirs["owner"]) == ("alice", "bob")

    refused = bob.delete(f"/api/endpoints/{mine['id']}", headers=csrf(bob))
    anonymous = httpx.delete(f"{oauth_envhub.url}/api/endpoints/{mine['id']}")
    by_admin = httpx.delete(
        f"{oauth_envhub.url}/api/endpoints/{theirs['id']}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    by_owner = alice.delete(f"/api/endpoints/{mine['id']}", headers=csrf(alice))

    assert refused.status_code == 403
    assert refused.json()["code"] == "not_owner"
    assert anonymous.status_code == 403
    assert by_admin.status_code == 200 and by_admin.json()["status"] == "stopped"
    assert by_owner.status_code == 200 and by_owner.json()["status"] == "stopped"


def test_with_sign_in_on_only_the_admin_runs_a_spaces_code_as_a_process(
    oauth_envhub: Envhub, hub: FakeHub, browsers: Browsers
) -> None:
    hub.add_space("alice/count", files=space_files("Count"))
    synced = httpx.post(f"{oauth_envhub.url}/api/sync?wait=true", headers=ADMIN, timeout=30)
    assert synced.status_code == 200, synced.text
    alice = browsers.sign_in(oauth_envhub.url, hub, "alice")

    refused = alice.post("/api/endpoints", json={"environment": "alice/count"}, headers=csrf(alice))
    assert refused.status_code == 403
    assert refused.json()["code"] == "hub_code_admin_only"
    # The admin's launch gets past that door, to the Space's own files (which hold no app to serve).
    by_admin = httpx.post(f"{oauth_envhub.url}/api/endpoints", json={"environment": "alice/count"}, headers=ADMIN)
    assert by_admin.status_code == 422, by_admin.text
    assert by_admin.json()["code"] == "needs_docker_backend"


def test_each_user_has_their_own_limit(oauth_envhub: Envhub, hub: FakeHub, browsers: Browsers) -> None:
    alice = browsers.sign_in(oauth_envhub.url, hub, "alice")
    bob = browsers.sign_in(oauth_envhub.url, hub, "bob")

    first = alice.post("/api/endpoints", json=COUNT, headers=csrf(alice))
    second = alice.post("/api/endpoints", json=COUNT, headers=csrf(alice))
    other = bob.post("/api/endpoints", json=COUNT, headers=csrf(bob))

    assert first.status_code == 201
    assert second.status_code == 429
    assert second.json()["code"] == "owner_endpoints_limit"
    assert other.status_code == 201


def test_a_space_is_made_in_the_users_namespace_with_their_token_which_never_leaks(
    oauth_envhub: Envhub,
    hub: FakeHub,
    browsers: Browsers,
    space_app: str,
    data_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    hub.boot_sequence = ["BUILDING"]
    bob = browsers.sign_in(oauth_envhub.url, hub, "bob")
    token = hub.oauth.grants[-1].token
    assert [t for t, user in hub.users.items() if user == "bob"] == [token]  # bob has no other token
    seen: list[httpx.Response] = []

    launched = bob.post("/api/endpoints", json=COUNT | {"backend": "space"}, headers=csrf(bob))
    seen.append(launched)
    assert launched.status_code == 201, launched.text
    endpoint_id = launched.json()["id"]
    wait_until(lambda: any(w.action == "commit" and w.repo_id == "bob/count" for w in hub.writes))
    hub.set_host("bob/count", space_app)
    hub.set_stage("bob/count", "RUNNING")
    wait_until(lambda: bob.get(f"/api/endpoints/{endpoint_id}").json()["status"] == "running", timeout_s=60)
    seen += [bob.get(f"/api/endpoints/{endpoint_id}"), bob.get("/api/endpoints"), bob.get("/api/me")]
    through_gateway = bob.get(f"/endpoints/{endpoint_id}/health")
    assert through_gateway.json() == {"status": "healthy"}
    # The environment's pages get an origin of their own: their scripts cannot act as bob on envhub.
    assert through_gateway.headers["content-security-policy"].startswith("sandbox allow-scripts")
    assert through_gateway.headers["access-control-allow-origin"] == "*"  # its assets load from its own origin
    seen.append(through_gateway)
    seen.append(bob.delete(f"/api/endpoints/{endpoint_id}", headers=csrf(bob)))

    writes = [(w.user, w.action) for w in hub.writes if w.repo_id == "bob/count"]
    assert writes[:2] == [("bob", "create"), ("bob", "commit")]  # bob's own token: alice's could not write there
    assert ("bob", "pause") in writes  # stopping used the sealed token
    assert seen[-1].json()["status"] == "stopped"
    for response in seen:
        assert token not in response.text
        assert all(token not in value for value in response.headers.values())
    assert token not in str(dict(bob.cookies))
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path
    assert caplog.records, "nothing was logged: the log check would prove nothing"
    assert token not in caplog.text


def test_with_sign_in_on_an_endpoint_nobody_owns_is_stopped_only_by_the_admin(
    settings: Settings, data_dir: Path, count_template: str
) -> None:
    server = Envhub(oauth_settings(settings, data_dir=data_dir, anonymous_launch=True))
    try:
        launched = server.launch(count_template)  # anonymous launches are allowed here, so nobody owns it
        assert launched["owner"] is None
        anonymous = server.http.delete(f"/api/endpoints/{launched['id']}")
        by_admin = server.http.delete(
            f"/api/endpoints/{launched['id']}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
    finally:
        server.stop()
    assert anonymous.status_code == 403
    assert anonymous.json()["code"] == "not_owner"
    assert by_admin.status_code == 200 and by_admin.json()["status"] == "stopped"


def test_with_sign_in_off_anyone_stops_an_endpoint_nobody_owns(envhub: Envhub, count_template: str) -> None:
    launched = envhub.launch(count_template)
    assert launched["owner"] is None
    stopped = envhub.http.delete(f"/api/endpoints/{launched['id']}")
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped"
