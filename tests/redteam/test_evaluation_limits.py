"""A signed-in user, mallory, on a public envhub (sign-in on, the fake Hub's users): she runs evaluations on
another user's private endpoint, asks for more than one evaluation may, and starts runs until she holds them all."""

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from tests.conftest import ADMIN_TOKEN, wait_until
from tests.fakehub import FakeHub
from tests.fakemodel import FakeModel, Reply
from tests.serving import Envhub
from tests.signin import oauth_settings

UNDER_WAY = ("queued", "running")
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
MALLORY = {"Authorization": "Bearer hf_mallory"}
VICTIM = {"Authorization": "Bearer hf_victim"}


@pytest.fixture
def public(settings: Settings, hub: FakeHub, tmp_path: Path, count_template: str) -> Iterator[Envhub]:
    hub.users = {"hf_mallory": "mallory", "hf_victim": "victim"}
    # The fake model is on loopback: this envhub allows private URLs (model calls are test_model_calls' door).
    server = Envhub(oauth_settings(settings, data_dir=tmp_path / "data", allow_private_urls=True))
    yield server
    server.stop()


@pytest.fixture
def held() -> Iterator[tuple[FakeModel, threading.Event]]:
    """A model that answers nobody until the test lets it: runs that play with it stay under way."""
    release = threading.Event()

    def brain(body: dict[str, Any]) -> Reply:
        release.wait(120)
        return Reply(text='```json\n{"add": 1}\n```')

    fake = FakeModel(brain)
    yield fake, release
    release.set()
    fake.close()


def running(envhub: Envhub, headers: dict[str, str], **options: Any) -> str:
    launched = envhub.http.post("/api/endpoints", json={"environment": "template:count", **options}, headers=headers)
    assert launched.status_code == 201, launched.text
    endpoint_id: str = launched.json()["id"]

    def status() -> Any:
        return envhub.http.get(f"/api/endpoints/{endpoint_id}", headers=headers).json()

    wait_until(lambda: status()["status"] in ("running", "failed"), 120)
    assert status()["status"] == "running", status()
    return endpoint_id


def evaluate(envhub: Envhub, headers: dict[str, str], **body: Any) -> Any:
    return envhub.http.post("/api/evaluations", json={"policy": "random", "episodes": 1, **body}, headers=headers)


def test_a_private_endpoint_is_evaluated_by_its_owner_and_the_admin_only(public: Envhub) -> None:
    launched = public.http.post(
        "/api/endpoints", json={"environment": "template:count", "options": {"private": True}}, headers=VICTIM
    )
    assert launched.status_code == 201, launched.text
    victims = launched.json()["id"]
    refused = evaluate(public, MALLORY, endpoint=victims)
    assert refused.status_code == 403, refused.text
    assert refused.json()["code"] == "endpoint_private"
    assert public.http.get("/api/evaluations").json() == []  # nothing was recorded, nothing played
    # A private endpoint's own runs reach it through the gateway, which wants its bearer token.
    admins = running(public, ADMIN, options={"private": True})
    created = evaluate(public, ADMIN, endpoint=admins)
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    wait_until(
        lambda: public.http.get(f"/api/evaluations/{run_id}", headers=ADMIN).json()["status"] not in UNDER_WAY, 60
    )
    run = public.http.get(f"/api/evaluations/{run_id}", headers=ADMIN).json()
    assert run["status"] == "finished" and [e["status"] for e in run["episodes"]] == ["done"], run


def test_one_evaluation_asks_no_more_than_the_caps(public: Envhub) -> None:
    refused = evaluate(public, MALLORY, environment="template:count", episodes=1000, concurrency=64, max_steps=10_000)
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    for named in ("episodes 1000 (at most 500", "concurrency 64 (at most 16", "max_steps 10000 (at most 1000"):
        assert named in detail, detail
    assert "ENVHUB_MAX_EVALUATION_CONCURRENCY" in detail and "ask for less" in detail
    assert public.http.get("/api/endpoints").json()["count"] == 0  # refused before anything was launched


def test_a_user_runs_so_many_evaluations_at_once(public: Envhub, held: tuple[FakeModel, threading.Event]) -> None:
    model, release = held
    shared = running(public, ADMIN)  # a public endpoint anyone may evaluate on
    policy = {"model": {"base_url": model.url, "model": "m"}}
    first, second = (evaluate(public, MALLORY, endpoint=shared, policy=policy) for _ in range(2))
    assert (first.status_code, second.status_code) == (201, 201), (first.text, second.text)
    third = evaluate(public, MALLORY, endpoint=shared, policy=policy)
    assert third.status_code == 429, third.text
    detail = third.json()["detail"]
    assert "mallory may run 2 evaluations at once on this server (ENVHUB_MAX_EVALUATIONS_PER_OWNER)" in detail
    assert first.json()["id"] in detail and "wait for one to finish, or cancel one" in detail
    # The cap is mallory's: another user still runs one.
    assert evaluate(public, VICTIM, endpoint=shared, policy=policy).status_code == 201
    # One of hers cancelled, she may start another.
    assert public.http.delete(f"/api/evaluations/{first.json()['id']}", headers=MALLORY).status_code == 200
    assert evaluate(public, MALLORY, endpoint=shared).status_code == 201
    release.set()
