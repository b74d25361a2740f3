"""The space backend against the fake Hub: create and upload, duplicate, follow the build, stop."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from openenv.core.generic_client import GenericEnvClient
from pydantic import SecretStr

from app.settings import Settings
from tests.conftest import ADMIN_TOKEN, readme, space_files, wait_until
from tests.fakehub import FakeHub
from tests.serving import Envhub


@pytest.fixture
def space_envhub(settings: Settings, tmp_path: Path, count_template: str, hub: FakeHub) -> Iterator[Envhub]:
    configured = settings.model_copy(
        update={"data_dir": tmp_path / "data", "hf_token": SecretStr("hf_test"), "space_poll_s": 0.05}
    )
    envhub = Envhub(configured)
    yield envhub
    envhub.stop()


def test_template_becomes_a_space_that_plays_through_the_gateway(
    space_envhub: Envhub, hub: FakeHub, space_app: str, templates_dir: Path
) -> None:
    hub.boot_sequence = ["BUILDING"]  # stays building until the test says otherwise
    options = {"namespace": "alice", "private": True, "hardware": "cpu-upgrade", "secrets": {"API_KEY": "s3cret"}}

    endpoint = space_envhub.launch("template:count", backend="space", options=options)

    wait_until(lambda: "server/app.py" in _files(hub, "alice/count"))
    assert _files(hub, "alice/count")["models.py"] == (templates_dir / "count" / "models.py").read_bytes()
    settings = hub.settings("alice/count")
    assert (settings.private, settings.sdk, settings.hardware) == (True, "docker", "cpu-upgrade")
    assert hub.secrets("alice/count") == {"API_KEY": "s3cret"}
    assert "s3cret" not in str(space_envhub.endpoint(endpoint["id"]))
    wait_until(lambda: "BUILDING" in space_envhub.endpoint(endpoint["id"])["message"])

    hub.set_host("alice/count", space_app)
    hub.set_stage("alice/count", "RUNNING")
    running = space_envhub.wait_status(endpoint["id"], "running", "failed")

    assert running["status"] == "running", running["message"]
    bearer = {"Authorization": f"Bearer {running['access_token']}"}  # a private Space's endpoint is private too
    with GenericEnvClient(base_url=running["url"], headers=bearer).sync() as client:
        client.reset(episode_id="on-a-space")
        assert client.step({"add": 10}).done is True
    stopped = space_envhub.http.delete(f"/api/endpoints/{endpoint['id']}").json()
    assert stopped["status"] == "stopped"
    assert hub.settings("alice/count").stage == "PAUSED"


def test_stopping_one_of_two_endpoints_on_one_space_leaves_the_other_serving(
    space_envhub: Envhub, hub: FakeHub, space_app: str
) -> None:
    first = space_envhub.launch("template:count", backend="space", options={"namespace": "alice"})
    wait_until(lambda: "server/app.py" in _files(hub, "alice/count"))
    hub.set_host("alice/count", space_app)
    assert space_envhub.wait_status(first["id"], "running", "failed")["status"] == "running"
    # A second launch with the same namespace and name is served by the same Space.
    second = space_envhub.running("template:count", backend="space", options={"namespace": "alice"})
    [serving] = space_envhub.ready_replicas(second["id"])

    stopped = space_envhub.http.delete(f"/api/endpoints/{first['id']}")
    space_envhub.services.keeper.watch()  # a watch of the endpoints, as every 2 s: it replaces dead replicas

    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped", stopped.text
    assert not any(w.action == "pause" for w in hub.writes), hub.writes
    assert hub.settings("alice/count").stage == "RUNNING"
    after = space_envhub.endpoint(second["id"])
    assert after["status"] == "running", after["message"]
    assert [r["id"] for r in after["pool"]["replicas"]] == [serving["id"]], after["pool"]  # none lost, none new
    with GenericEnvClient(base_url=second["url"]).sync() as client:
        client.reset(episode_id="after-the-other-stopped")
        assert client.step({"add": 10}).done is True
    # The last endpoint on the Space pauses it.
    space_envhub.http.delete(f"/api/endpoints/{second['id']}")
    assert hub.settings("alice/count").stage == "PAUSED"


def test_hub_environment_is_duplicated_and_deleted_on_stop(space_envhub: Envhub, hub: FakeHub, space_app: str) -> None:
    hub.add_space("openenv/count", files=space_files("Count"))
    synced = space_envhub.http.post("/api/sync?wait=true", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert synced.json()["added"] == 1
    hub.boot_sequence = ["BUILDING"]

    endpoint = space_envhub.launch("openenv/count", backend="space", options={"delete_on_stop": True})

    wait_until(lambda: _exists(hub, "alice/count"))  # the namespace defaults to the token's user
    assert any(w.action == "duplicate" and w.repo_id == "alice/count" for w in hub.writes)
    hub.set_host("alice/count", space_app)
    hub.set_stage("alice/count", "RUNNING")
    assert space_envhub.wait_status(endpoint["id"], "running", "failed")["status"] == "running"
    space_envhub.http.delete(f"/api/endpoints/{endpoint['id']}")
    assert not _exists(hub, "alice/count")


def test_a_space_that_moved_since_the_sync_is_not_duplicated_as_the_old_revision(
    space_envhub: Envhub, hub: FakeHub
) -> None:
    hub.add_space("openenv/count", files=space_files("Count"))
    synced = space_envhub.http.post("/api/sync?wait=true", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert synced.json()["added"] == 1
    hub.update_space("openenv/count", files={"README.md": readme("title: Count\ntags: [openenv]", "# Count, v2\n")})

    refused = space_envhub.http.post("/api/endpoints", json={"environment": "openenv/count", "backend": "space"})

    assert (refused.status_code, refused.json()["code"]) == (422, "space_moved_on"), refused.text
    assert not any(w.action == "duplicate" for w in hub.writes)


def test_build_error_fails_the_endpoint_with_the_hubs_message(space_envhub: Envhub, hub: FakeHub) -> None:
    hub.boot_sequence = ["BUILDING", "BUILD_ERROR"]
    hub.boot_error_message = "pip install failed: no matching distribution"

    endpoint = space_envhub.launch("template:count", backend="space", options={"name": "count-broken"})

    failed = space_envhub.wait_status(endpoint["id"], "failed", "running")
    assert (failed["status"], failed["reason"]) == ("failed", "space_failed")
    assert "BUILD_ERROR: pip install failed" in failed["message"]  # the Hub's stage and its own words, passed on


def test_someone_elses_namespace_is_refused(space_envhub: Envhub) -> None:
    endpoint = space_envhub.launch("template:count", backend="space", options={"namespace": "bob"})
    failed = space_envhub.wait_status(endpoint["id"], "failed", "running")
    assert failed["reason"] == "hub_refused"
    assert "HTTP 403" in failed["message"]  # what the Hub answered, passed on


@pytest.mark.parametrize(
    ("options", "detail"),
    [
        ({"region": "eu"}, "the space backend takes"),
        ({"name": "no spaces allowed"}, "is not a valid Space name"),
        ({"private": "yes"}, "option private must be true or false"),
        ({"sleep_time": "soon"}, "option sleep_time must be seconds"),
    ],
)
def test_space_options_are_checked(space_envhub: Envhub, options: dict[str, object], detail: str) -> None:
    response = space_envhub.http.post(
        "/api/endpoints", json={"environment": "template:count", "backend": "space", "options": options}
    )
    assert (response.status_code, response.json()["code"]) == (422, "invalid_request")
    assert detail in response.json()["detail"]  # which option and what it takes: only the detail says so


def test_space_backend_needs_a_token(envhub: Envhub) -> None:
    response = envhub.http.post("/api/endpoints", json={"environment": "template:count", "backend": "space"})
    assert (response.status_code, response.json()["code"]) == (422, "hub_token_required")


def _files(hub: FakeHub, space_id: str) -> dict[str, bytes]:
    try:
        return hub.files(space_id)
    except KeyError:
        return {}


def _exists(hub: FakeHub, space_id: str) -> bool:
    try:
        hub.settings(space_id)
    except KeyError:
        return False
    return True
