"""A hostile model server: it answers an evaluation's chat completion with a redirect to an internal address
(loopback, where envhub's own machine serves things nobody outside should reach). envhub refuses private URLs, as a
public deployment does; the model server itself stands for a public address."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from core.outbound import OutboundGuard
from tests.checkservers import Served, counting, plain, serve
from tests.conftest import wait_until
from tests.fakemodel import FakeModel, Reply
from tests.serving import Envhub

SECRET = "internal billing service: ledger key 7f3a-never-leave-this-host"
KEY = "sk-hostile-model-key-0123"


@pytest.fixture
def internal() -> Iterator[tuple[Served, list[str]]]:
    """A service on loopback that records every request and answers with text that must never leave the host."""
    app, seen = counting(plain(400, json.dumps({"error": {"message": SECRET}}).encode()))
    with serve(app) as served:
        yield served, seen


@pytest.fixture
def hostile(internal: tuple[Served, list[str]]) -> Iterator[FakeModel]:
    """A model server that redirects every chat completion (307: the POST and its body go on) to the internal one."""
    served, _ = internal
    fake = FakeModel(lambda body: Reply(status=307, headers={"Location": f"{served.url}/v1/chat/completions"}))
    yield fake
    fake.close()


def test_a_redirect_to_an_internal_address_reaches_nothing_and_leaks_nothing(
    settings: Settings, tmp_path: Path, count_template: str, internal: tuple[Served, list[str]], hostile: FakeModel
) -> None:
    _, reached = internal
    # The guard of a public deployment (private URLs refused), taking the hostile server's URL for a public one.
    guard = OutboundGuard(allow_private=False).with_trusted(hostile.url)
    envhub = Envhub(
        settings.model_copy(update={"data_dir": tmp_path / "data", "allow_private_urls": False}), guard=guard
    )
    try:
        created = envhub.http.post(
            "/api/evaluations",
            json={
                "environment": count_template,
                "policy": {"model": {"base_url": hostile.url, "model": "m", "api_key": KEY}},
                "episodes": 1,
            },
        )
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        wait_until(lambda: envhub.http.get(f"/api/evaluations/{run_id}").json()["status"] == "finished", 120)
        answers: list[Any] = [envhub.http.get(f"/api/evaluations/{run_id}").text]
        run = json.loads(answers[0])
        for episode in run["episodes"]:
            answers.append(envhub.http.get(f"/api/evaluations/episodes/{episode['id']}").text)
        answers.append(envhub.http.get(f"/api/evaluations/{run_id}/episodes.jsonl").text)
        answers.append(envhub.http.get("/api/evaluations").text)
    finally:
        envhub.stop()
    assert hostile.requests, "the model server was never asked"
    assert reached == [], f"envhub followed the redirect to the internal address: {reached}"
    for answer in answers:
        assert SECRET not in answer
        assert KEY not in answer
    [episode] = run["episodes"]
    assert episode["status"] == "failed"
    assert "redirected" in episode["error"] and "loopback" in episode["error"], episode["error"]
