"""The HTTP API: shapes, errors and the admin-only sync."""

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.conftest import ADMIN_TOKEN, space_files, wait_until
from tests.fakehub import FakeHub, Fault

pytestmark = pytest.mark.databases

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def synced(client: TestClient, hub: FakeHub) -> TestClient:
    hub.add_space("alice/chess", files=space_files("Chess", extra="datasets: [alice/games]\n"), likes=3)
    hub.add_space("bob/wordle", files=space_files("Wordle"), tags=("openenv", "word"), likes=7)
    hub.add_dataset("alice/games", description="Recorded games")
    response = client.post("/api/sync?wait=true", headers=ADMIN)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "ok"
    return client


def test_list_environments_shape(synced: TestClient) -> None:
    body = synced.get("/api/environments", params={"sort": "likes"}).json()
    assert body["count"] == 2
    assert [e["id"] for e in body["data"]] == ["bob/wordle", "alice/chess"]
    first = body["data"][0]
    assert {"id", "source", "title", "emoji", "description", "author", "tags", "likes", "host"} <= set(first)
    assert "readme" not in first  # the list stays light; the detail has it


def test_list_environments_filters(synced: TestClient) -> None:
    assert synced.get("/api/environments", params={"q": "chess"}).json()["count"] == 1
    assert synced.get("/api/environments", params={"tag": "word"}).json()["data"][0]["id"] == "bob/wordle"
    assert synced.get("/api/environments", params={"author": "alice"}).json()["count"] == 1
    assert synced.get("/api/environments", params={"source": "template"}).json()["count"] == 0
    page = synced.get("/api/environments", params={"limit": 1, "offset": 1, "sort": "likes"}).json()
    assert (page["count"], [e["id"] for e in page["data"]]) == (2, ["alice/chess"])


def test_environment_detail(synced: TestClient) -> None:
    body = synced.get("/api/environments/alice/chess").json()
    assert body["id"] == "alice/chess"
    assert body["readme"].startswith("# Chess")
    assert body["card"]["title"] == "Chess"
    assert body["manifest"]["name"] == "chess"
    assert body["datasets"] == ["alice/games"]
    assert body["problems"] == []


def test_datasets(synced: TestClient) -> None:
    body = synced.get("/api/datasets").json()
    assert body["count"] == 1
    assert body["data"][0]["id"] == "alice/games"
    detail = synced.get("/api/datasets/alice/games").json()
    assert detail["environments"] == ["alice/chess"]
    assert detail["description"] == "Recorded games"


@pytest.mark.parametrize(
    ("path", "status", "code", "named"),
    [
        ("/api/environments/nobody/nothing", 404, "not_found", "nobody/nothing"),
        ("/api/datasets/nobody/nothing", 404, "not_found", "nobody/nothing"),
        ("/api/environments?limit=1000", 422, "invalid_request", "query limit"),
        ("/api/environments?sort=random", 422, "invalid_request", "query sort"),
        ("/api/environments?source=elsewhere", 422, "invalid_request", "query source"),
        ("/api/sync/999", 404, "not_found", "999"),
    ],
)
def test_errors_are_a_detail_string_and_a_stable_code(
    client: TestClient, path: str, status: int, code: str, named: str
) -> None:
    response = client.get(path)
    assert response.status_code == status
    body = response.json()
    assert set(body) == {"detail", "code"} | ({"errors"} if code == "invalid_request" else set())
    assert isinstance(body["detail"], str) and named in body["detail"]  # it names what was not found or not valid
    assert body["code"] == code


def test_sync_needs_the_admin_token(client: TestClient) -> None:
    missing = client.post("/api/sync")
    assert (missing.status_code, missing.json()["code"]) == (401, "admin_token_required")
    wrong = client.post("/api/sync", headers={"Authorization": "Bearer nope"})
    assert (wrong.status_code, wrong.json()["code"]) == (401, "admin_token_refused")


def test_sync_is_off_without_an_admin_token(settings: Settings) -> None:
    with TestClient(create_app(settings.model_copy(update={"admin_token": None}))) as client:
        response = client.post("/api/sync", headers={"Authorization": "Bearer anything"})
    assert (response.status_code, response.json()["code"]) == (403, "admin_routes_off")


def test_background_sync_can_be_followed(client: TestClient, hub: FakeHub) -> None:
    hub.add_space("alice/chess", files=space_files("Chess"))
    hub.fail("GET", "/api/spaces", Fault(hang_s=0.3))

    started = client.post("/api/sync", headers=ADMIN)

    assert started.status_code == 202
    run = started.json()
    assert run["status"] == "running"
    assert client.post("/api/sync", headers=ADMIN).status_code == 409
    wait_until(lambda: client.get(f"/api/sync/{run['id']}").json()["status"] != "running")
    finished = client.get(f"/api/sync/{run['id']}").json()
    assert (finished["status"], finished["added"]) == ("ok", 1)
    assert client.get("/api/sync").json()["data"][0]["id"] == run["id"]


def test_health(synced: TestClient, hub: FakeHub) -> None:
    body = synced.get("/api/health").json()
    assert body["status"] == "ok"
    assert body["environments"] == 2
    assert body["hub_endpoint"] == hub.url
    assert body["last_sync"]["status"] == "ok"


def test_openapi_docs(client: TestClient) -> None:
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/api/environments", "/api/datasets", "/api/sync", "/api/health"} <= set(paths)
