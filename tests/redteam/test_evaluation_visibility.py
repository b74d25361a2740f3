"""The runs of a private endpoint, read by strangers on a public envhub (sign-in on): anonymous callers and another
signed-in user, mallory, ask for victim's runs on her private endpoint by listing, by id, through their episodes and
exports, and on the leaderboard; they are told there are no such runs, even after the endpoint has stopped."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from tests.conftest import ADMIN_TOKEN, wait_until
from tests.fakehub import FakeHub
from tests.serving import Envhub
from tests.signin import oauth_settings

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
MALLORY = {"Authorization": "Bearer hf_mallory"}
VICTIM = {"Authorization": "Bearer hf_victim"}
STRANGERS = {"anonymous": {}, "mallory": MALLORY}
BOARD = "/api/environments/template:count/leaderboard"


@pytest.fixture
def public(settings: Settings, hub: FakeHub, tmp_path: Path, count_template: str) -> Iterator[Envhub]:
    hub.users = {"hf_mallory": "mallory", "hf_victim": "victim"}
    server = Envhub(oauth_settings(settings, data_dir=tmp_path / "data", anonymous_launch=False))
    yield server
    server.stop()


def finished_run(envhub: Envhub, headers: dict[str, str], **target: Any) -> str:
    """A run of the random policy, one episode, played to its end."""
    created = envhub.http.post("/api/evaluations", json={"policy": "random", "episodes": 1, **target}, headers=headers)
    assert created.status_code == 201, created.text
    run_id: str = created.json()["id"]

    def status() -> Any:
        return envhub.http.get(f"/api/evaluations/{run_id}", headers=headers).json()["status"]

    wait_until(lambda: status() not in ("queued", "running"), 120)
    assert status() == "finished"
    return run_id


def listed(envhub: Envhub, headers: dict[str, str]) -> set[str]:
    runs = envhub.http.get("/api/evaluations", headers=headers)
    assert runs.status_code == 200, runs.text
    mine = envhub.http.get("/api/evaluations", params={"environment": "template:count"}, headers=headers).json()
    board = envhub.http.get(BOARD, headers=headers)
    assert board.status_code == 200, board.text
    on_board = {row["evaluation"] for group in board.json()["groups"] for row in group["rows"]}
    assert {r["id"] for r in runs.json()} == {r["id"] for r in mine} == on_board
    return on_board


@pytest.mark.timeout(300)  # two endpoints start and play, on a machine that may be busy
def test_a_private_endpoints_runs_are_its_owners_and_the_admins_only(public: Envhub) -> None:
    launched = public.http.post(
        "/api/endpoints", json={"environment": "template:count", "options": {"private": True}}, headers=VICTIM
    )
    assert launched.status_code == 201, launched.text
    endpoint_id = launched.json()["id"]

    def status() -> Any:
        return public.http.get(f"/api/endpoints/{endpoint_id}", headers=VICTIM).json()["status"]

    wait_until(lambda: status() != "starting", 120)
    assert status() == "running"
    private = finished_run(public, VICTIM, endpoint=endpoint_id)
    shared = finished_run(public, VICTIM, environment="template:count")  # on an endpoint launched for it: public
    episode = f"{private}-0"

    def hidden_from(headers: dict[str, str]) -> None:
        assert listed(public, headers) == {shared}
        for read in (f"/api/evaluations/{private}", f"/api/evaluations/{private}/episodes.jsonl"):
            answer = public.http.get(read, headers=headers)
            assert (answer.status_code, answer.json()["code"]) == (404, "not_found"), (read, answer.text)
        answer = public.http.get(f"/api/evaluations/episodes/{episode}", headers=headers)
        assert (answer.status_code, answer.json()["code"]) == (404, "not_found"), answer.text
        pushed = public.http.post(f"/api/evaluations/{private}/push", json={"repo": "mallory/loot"}, headers=headers)
        assert (pushed.status_code, pushed.json()["code"]) == (404, "not_found"), pushed.text
        cancelled = public.http.delete(f"/api/evaluations/{private}", headers=headers)
        assert (cancelled.status_code, cancelled.json()["code"]) == (404, "not_found"), cancelled.text
        # The public run stays everyone's.
        assert public.http.get(f"/api/evaluations/{shared}", headers=headers).status_code == 200

    def shown_to(headers: dict[str, str]) -> None:
        assert listed(public, headers) == {private, shared}
        assert public.http.get(f"/api/evaluations/{private}", headers=headers).json()["private"] is True
        exported = public.http.get(f"/api/evaluations/{private}/episodes.jsonl", headers=headers)
        assert exported.status_code == 200 and exported.text.count("\n") == 1, exported.text
        assert public.http.get(f"/api/evaluations/episodes/{episode}", headers=headers).json()["records"]

    for headers in STRANGERS.values():
        hidden_from(headers)
    for headers in (VICTIM, ADMIN):
        shown_to(headers)
    # Stopped, the endpoint's runs stay as private as it was.
    assert public.http.delete(f"/api/endpoints/{endpoint_id}", headers=VICTIM).status_code == 200
    wait_until(lambda: status() == "stopped", 60)
    for headers in STRANGERS.values():
        hidden_from(headers)
    shown_to(VICTIM)
