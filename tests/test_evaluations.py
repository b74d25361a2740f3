"""Evaluations end to end: envhub served on loopback launches real template servers for a run, a policy (a
baseline, or a model behind a real fake chat-completions server) plays them through the gateway, and the
API returns the runs, their episodes, the JSONL export and the leaderboard."""

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, col, select

from app.settings import Settings
from evals.models import EpisodeStep
from tests.conftest import wait_until
from tests.fakehub import FakeHub
from tests.fakemodel import FakeModel, Reply
from tests.serving import TEMPLATES, Envhub

SECRET = "sk-never-shown-0123456789"


@pytest.fixture
def evaluating(settings: Settings, tmp_path: Path) -> Iterator[Envhub]:
    """envhub with the built-in templates, launching them for runs."""
    server = Envhub(
        settings.model_copy(
            update={
                "data_dir": tmp_path / "data",
                "templates_dir": TEMPLATES,
                "allow_private_urls": True,
                "max_endpoints_per_owner": 10,
            }
        )
    )
    yield server
    server.stop()


def finished(envhub: Envhub, evaluation_id: str, timeout_s: float = 120) -> dict[str, Any]:
    wait_until(
        lambda: envhub.http.get(f"/api/evaluations/{evaluation_id}").json()["status"] not in ("queued", "running"),
        timeout_s,
    )
    run: dict[str, Any] = envhub.http.get(f"/api/evaluations/{evaluation_id}").json()
    return run


def start(envhub: Envhub, **body: Any) -> dict[str, Any]:
    response = envhub.http.post("/api/evaluations", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


TEMPLATE_NAMES = sorted(p.name for p in TEMPLATES.iterdir() if (p / "openenv.yaml").exists())


def test_a_model_plays_every_template_to_the_end(evaluating: Envhub, model: FakeModel) -> None:
    config = {"base_url": model.url, "model": "fake-1", "api_key": SECRET}
    runs = {
        name: start(
            evaluating,
            environment=f"template:{name}",
            policy={"model": config},
            episodes=2,
            concurrency=2,
            max_steps=200,
        )
        for name in TEMPLATE_NAMES
    }
    for name, created in runs.items():
        run = finished(evaluating, created["id"], timeout_s=180)
        assert run["status"] == "finished", (name, run["message"])
        # The environment ended each: the fake model's one move may be refused until a game's budget of refused
        # moves ends it (column 0 of connect four once full, a wall of the maze), which reads invalid.
        assert {e["status"] for e in run["episodes"]} <= {"done", "invalid"}, (name, run["episodes"])
        assert run["summary"]["episodes"] == 2 and run["summary"]["tokens"] > 0
        assert run["policy"]["model"] == "fake-1" and run["launched"] is True
        # The endpoint launched for the run is stopped when it ends.
        endpoint_id = run["endpoint"]
        wait_until(lambda: evaluating.endpoint(endpoint_id)["status"] == "stopped", timeout_s=30)  # noqa: B023
    everything = evaluating.http.get("/api/evaluations").text + "".join(
        evaluating.http.get(f"/api/evaluations/{r['id']}/episodes.jsonl").text for r in runs.values()
    )
    assert SECRET not in everything
    assert all(SECRET not in json.dumps(body) for _, body in model.requests)
    assert all(headers["authorization"] == f"Bearer {SECRET}" for headers, _ in model.requests)


def test_invalid_replies_are_fed_back_retried_and_counted(evaluating: Envhub) -> None:
    replies = iter(["I am not sure.", '{"guess": 5}', '```json\n{"guess": "crane"}\n```'] * 100)
    seen: list[dict[str, Any]] = []

    def brain(body: dict[str, Any]) -> Reply:
        seen.append(body)
        return Reply(text=next(replies))

    fake = FakeModel(brain)
    try:
        created = start(
            evaluating,
            environment="template:wordle",
            policy={"model": {"base_url": fake.url, "model": "stubborn"}},
            episodes=1,
            max_steps=3,
        )
        run = finished(evaluating, created["id"])
    finally:
        fake.close()
    episode = run["episodes"][0]
    assert (episode["status"], episode["code"]) == ("cut", "max_steps")
    assert (episode["steps"], episode["invalid"]) == (3, 6)
    assert run["summary"]["invalid_rate"] == pytest.approx(6 / 9)
    # The problem went back to the model as the next message.
    assert "no JSON object was found" in seen[1]["messages"][-1]["content"]
    assert "is not of type 'string'" in seen[2]["messages"][-1]["content"]
    lines = evaluating.http.get(f"/api/evaluations/{run['id']}/episodes.jsonl").text.splitlines()
    step = json.loads(lines[0])["records"][1]
    assert step["retries"] == 2 and step["reply"].endswith("```") and step["action"] == {"guess": "crane"}
    assert json.loads(lines[0])["run"]["policy"]["model"] == "stubborn"


def test_concurrency_is_respected_and_a_leaderboard_ranks_the_runs(evaluating: Envhub) -> None:
    fake = FakeModel(lambda body: Reply(text='{"guess": "crane"}', delay_s=0.2))
    try:
        created = start(
            evaluating,
            environment="template:wordle",
            policy={"model": {"base_url": fake.url, "model": "crane-bot"}},
            episodes=6,
            concurrency=3,
            max_steps=2,
        )
        run = finished(evaluating, created["id"])
        assert fake.most_in_flight == 3
    finally:
        fake.close()
    assert run["status"] == "finished" and len(run["episodes"]) == 6
    baseline = finished(
        evaluating, start(evaluating, environment="template:wordle", policy="random", episodes=3, max_steps=2)["id"]
    )
    assert baseline["status"] == "finished"
    board = evaluating.http.get("/api/environments/template:wordle/leaderboard").json()
    (group,) = board["groups"]
    assert group["taskset"] == "seeds"
    assert {row["policy"]: row["baseline"] for row in group["rows"]} == {"crane-bot": False, "random": True}
    assert {row["policy"]: row["episodes"] for row in group["rows"]} == {"crane-bot": 6, "random": 3}


def test_cancel_keeps_finished_episodes(evaluating: Envhub) -> None:
    answered = threading.Semaphore(1)  # the first episode is answered; the next waits for the model

    def brain(body: dict[str, Any]) -> Reply:
        return Reply(text='{"guess": "crane"}', delay_s=0 if answered.acquire(blocking=False) else 30)

    fake = FakeModel(brain)
    try:
        created = start(
            evaluating,
            environment="template:wordle",
            policy={"model": {"base_url": fake.url, "model": "slow", "timeout_s": 60}},
            episodes=3,
            max_steps=1,
        )
        wait_until(lambda: len(evaluating.http.get(f"/api/evaluations/{created['id']}").json()["episodes"]) == 1, 60)
        wait_until(lambda: fake.in_flight == 1, timeout_s=30)
        cancelled = evaluating.http.delete(f"/api/evaluations/{created['id']}")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == "cancelled"
    finally:
        fake.close()
    run = evaluating.http.get(f"/api/evaluations/{created['id']}").json()
    assert len(run["episodes"]) == 1
    # The unfinished episodes' records (their resets, stored as played) went with them; the kept one's stay.
    with Session(evaluating.services.engine) as session:
        stored = session.exec(select(EpisodeStep.episode).where(col(EpisodeStep.episode).startswith(created["id"])))
        assert set(stored) == {run["episodes"][0]["id"]}


def test_bad_requests_say_what_to_fix(evaluating: Envhub) -> None:
    invalid = [
        ({"policy": "random", "episodes": 1}, ([], "environment_or_endpoint")),
        ({"environment": "template:wordle", "episodes": 1, "seeds": [1]}, ([], "episodes_seeds_or_indices")),
        ({"environment": "template:wordle", "indices": [0]}, ([], "split_required")),
        ({"environment": "template:wordle", "split": "test", "seeds": [1]}, ([], "seeds_with_split")),
        (
            {"environment": "template:wordle", "policy": {"model": {"base_url": "file:///etc", "model": "m"}}},
            (["base_url"], "value_error"),
        ),
    ]
    for body, error in invalid:
        response = evaluating.http.post("/api/evaluations", json=body)
        assert (response.status_code, response.json()["code"]) == (422, "invalid_request"), (body, response.text)
        assert error in [(e["loc"][-1:], e["type"]) for e in response.json()["errors"]], (body, response.text)
    for body in ({"environment": "nobody/nothing", "episodes": 1}, {"endpoint": "e-none", "episodes": 1}):
        response = evaluating.http.post("/api/evaluations", json=body)
        assert (response.status_code, response.json()["code"]) == (404, "not_found"), (body, response.text)
    started = time.monotonic()
    assert evaluating.http.get("/api/evaluations/ev-none").status_code == 404
    assert time.monotonic() - started < 5


def test_a_task_split_is_played_by_index_and_an_unknown_split_fails_the_run(evaluating: Envhub) -> None:
    created = start(
        evaluating, environment="template:arithmetic_tasks", policy="first-legal", split="test", indices=[0, 3]
    )
    run = finished(evaluating, created["id"])
    assert run["status"] == "finished", run["message"]
    assert (run["taskset_label"], run["taskset"]) == ("split:test", {"split": "test", "indices": [0, 3]})
    assert [e["task"] for e in run["episodes"]] == [{"split": "test", "index": 0}, {"split": "test", "index": 3}]
    export = evaluating.http.get(f"/api/evaluations/{run['id']}/episodes.jsonl").text.splitlines()
    assert json.loads(export[1])["records"][0]["options"] == {"split": "test", "index": 3}

    wrong = finished(evaluating, start(evaluating, environment="template:wordle", split="test", indices=[0])["id"])
    assert wrong["status"] == "failed"
    assert wrong["code"] == "no_task_api"  # template:wordle serves no Task API, so no split 'test'


def test_runs_left_by_an_envhub_that_stopped_are_interrupted_and_keep_their_episodes(evaluating: Envhub) -> None:
    answered = threading.Semaphore(2)  # two episodes finish; the third waits for the model until envhub stops

    def brain(body: dict[str, Any]) -> Reply:
        return Reply(text='{"guess": "crane"}', delay_s=0 if answered.acquire(blocking=False) else 30)

    fake = FakeModel(brain)
    try:
        created = start(
            evaluating,
            environment="template:wordle",
            policy={"model": {"base_url": fake.url, "model": "m"}},
            episodes=4,
            max_steps=1,
        )
        wait_until(lambda: len(evaluating.http.get(f"/api/evaluations/{created['id']}").json()["episodes"]) >= 2, 60)
        evaluating.stop()  # envhub stops with the third episode waiting for the model
    finally:
        fake.close()
    again = Envhub(evaluating.settings)
    try:
        run = again.http.get(f"/api/evaluations/{created['id']}").json()
    finally:
        again.stop()
    assert run["status"] == "interrupted"
    assert len(run["episodes"]) == 2


def test_an_episode_whose_server_dies_fails_alone_and_the_run_plays_on(evaluating: Envhub) -> None:
    """A replica killed in the middle of an episode fails that episode (its connection broke), not the run: the
    pool starts another server, and the next episodes play on it."""
    endpoint = evaluating.running("template:wordle")
    [replica] = evaluating.ready_replicas(endpoint["id"])
    pid = int(evaluating.services.endpoints.replicas(endpoint["id"])[0].handle["pid"])
    thinking = threading.Event()

    def brain(body: dict[str, Any]) -> Reply:
        if not thinking.is_set():  # the run's first move: its server is killed while the model thinks
            thinking.set()
            return Reply(text='{"guess": "crane"}', delay_s=3)
        return Reply(text='{"guess": "crane"}')

    fake = FakeModel(brain)
    try:
        created = start(
            evaluating,
            endpoint=endpoint["id"],
            policy={"model": {"base_url": fake.url, "model": "m"}},
            episodes=3,
            max_steps=2,
        )
        wait_until(thinking.is_set, 60)
        os.kill(pid, signal.SIGKILL)
        run = finished(evaluating, created["id"], timeout_s=180)
    finally:
        fake.close()
    assert run["status"] == "finished", run["message"]
    first, *rest = run["episodes"]
    assert (first["status"], first["code"]) == ("failed", "connection_failed"), first
    assert [e["status"] for e in rest] == ["cut", "cut"]  # two steps each, on the server that replaced it
    assert replica["id"] not in {r["id"] for r in evaluating.ready_replicas(endpoint["id"])}


def test_rollouts_are_pushed_to_the_hub_as_a_dataset_with_the_users_token(evaluating: Envhub, hub: FakeHub) -> None:
    run = finished(evaluating, start(evaluating, environment="template:wordle", episodes=2, max_steps=2)["id"])
    push = f"/api/evaluations/{run['id']}/push"

    anonymous = evaluating.http.post(push, json={"repo": "alice/wordle-rollouts"})
    assert (anonymous.status_code, anonymous.json()["code"]) == (403, "forbidden")
    pushed = evaluating.http.post(
        push, json={"repo": "alice/wordle-rollouts"}, headers={"Authorization": "Bearer hf_test"}
    )
    assert pushed.status_code == 200, pushed.text

    files = hub.files("alice/wordle-rollouts", repo_type="dataset")
    lines = [json.loads(line) for line in files["data/episodes.jsonl"].decode().splitlines()]
    assert [line["index"] for line in lines] == [0, 1] and lines[0]["run"]["evaluation"] == run["id"]
    card = files["README.md"].decode()
    assert "  - openenv\n  - rl-environment" in card
    assert "template:wordle" in card and '| policy | `{"kind": "random"}` |' in card and run["revision"] in card
    assert {w.user for w in hub.writes if w.repo_id == "alice/wordle-rollouts"} == {"alice"}

    elsewhere = evaluating.http.post(push, json={"repo": "bob/rollouts"}, headers={"Authorization": "Bearer hf_test"})
    assert (elsewhere.status_code, elsewhere.json()["code"]) == (403, "hub_write_refused")


def test_moves_the_environment_refuses_count_as_invalid(evaluating: Envhub) -> None:
    # The random baseline guesses random letters; wordle answers each with an error and counts no guess.
    run = finished(
        evaluating, start(evaluating, environment="template:wordle", policy="random", episodes=2, max_steps=3)["id"]
    )
    assert [(e["steps"], e["invalid"]) for e in run["episodes"]] == [(0, 3), (0, 3)]
    assert run["summary"]["invalid_rate"] == 1.0
    lines = evaluating.http.get(f"/api/evaluations/{run['id']}/episodes.jsonl").text.splitlines()
    steps = [r for r in json.loads(lines[0])["records"] if r["kind"] == "step"]
    assert len(steps) == 3 and all("not in the word list" in r["refused"] or "letters" in r["refused"] for r in steps)


def test_an_episode_the_environment_ends_on_refused_moves_is_invalid_not_done(evaluating: Envhub) -> None:
    # Wordle ends a game after 20 refused guesses: the random baseline took no step, it did not finish the game.
    run = finished(
        evaluating, start(evaluating, environment="template:wordle", policy="random", episodes=1, max_steps=30)["id"]
    )
    (episode,) = run["episodes"]
    assert (episode["status"], episode["steps"], episode["invalid"]) == ("invalid", 0, 20)
    assert run["summary"]["completed"] == 0


def test_an_mcp_environment_is_played_through_its_mcp_door(evaluating: Envhub, model: FakeModel) -> None:
    """The harness acts on an MCP environment as any agent harness does: each episode is an MCP session on the
    endpoint's door, reset with the episode's seed, whose recording matches the run's episode."""
    config = {"base_url": model.url, "model": "fake-1"}
    created = start(evaluating, environment="template:toolbox", policy={"model": config}, seeds=[3, 11], concurrency=2)
    run = finished(evaluating, created["id"])
    assert run["status"] == "finished", run["message"]
    listed = evaluating.http.get(f"/api/endpoints/{run['endpoint']}/sessions").json()["data"]
    door = [s for s in listed if s["client"] == f"envhub evaluation {run['id']}"]
    assert len(door) == 2, listed
    played = {}
    for session in door:
        read = evaluating.http.get(f"/api/endpoints/{run['endpoint']}/sessions/{session['id']}").json()
        (episode,) = read["episodes"]
        played[episode["seed"]] = episode
    episodes = [evaluating.http.get(f"/api/evaluations/episodes/{e['id']}").json() for e in run["episodes"]]
    for episode in episodes:
        recorded = played[episode["seed"]]
        assert recorded["status"] == episode["status"] == "done"
        assert recorded["reward"] == episode["reward"]
        reset, *steps = episode["records"]
        door_reset, *door_steps = recorded["records"]
        assert door_reset["observation"] == reset["observation"]  # the seed chose the same task
        assert [s["tool"] for s in door_steps] == [s["action"]["tool_name"] for s in steps]
    questions = {e["records"][0]["observation"]["question"] for e in episodes}
    assert len(questions) == 2, questions  # two seeds, two tasks: each reached the environment's reset
