"""Model presets: saved per owner with the API key sealed, shown without it, named by a run (API and CLI), its
table added by migration 0008; and the issue's promise that a model's API key never appears in any response,
log or download, run with the key typed in and through a preset."""

import json
import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic import command
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import Engine, inspect, text
from sqlmodel import SQLModel

from app.auth.sign_in_sessions import session_secret
from app.main import create_app
from app.settings import Settings
from core.db import MIGRATION_LOCK, create_db_engine, exclusive, init_db, migration_config
from core.errors import ConflictError, InvalidInputError, NotFoundError, TooManyRequestsError
from core.sealing import Sealer
from evals.presets import MAX_PRESETS_PER_OWNER, ModelPresets
from rollout.model import ModelConfig
from tests.conftest import ADMIN_TOKEN
from tests.fakehub import FakeHub
from tests.fakemodel import FakeModel, generic_brain
from tests.serving import TEMPLATES, Envhub
from tests.signin import oauth_settings
from tests.test_cli import cli_env, run_cli
from tests.test_evaluations import finished

KEY = "sk-test-" + secrets.token_hex(16)
ALICE = {"Authorization": "Bearer hf_test"}  # the fake Hub's alice
BOB = {"Authorization": "Bearer hf_bob"}
URL = "http://127.0.0.1:9/v1"


# -- the store, on SQLite and Postgres


def every_field(**update: Any) -> ModelConfig:
    """A model with every setting away from its default, so a round trip that drops one shows."""
    settings = {"base_url": URL, "model": "m", "api_key": KEY, "temperature": 0.3, "top_p": 0.9, "max_tokens": 64}
    settings |= {"seed": 2**40, "timeout_s": 12.5, "system_prompt": "Play well.", "token_ids": True}
    return ModelConfig.model_validate(settings | update)


@pytest.mark.databases
def test_a_preset_keeps_its_key_sealed_and_shows_only_that_it_has_one(engine: Engine) -> None:
    presets = ModelPresets(engine, Sealer(b"one secret"))
    saved = presets.save("alice", "qwen", every_field())

    shown = presets.public(saved)
    assert shown.has_api_key and (shown.owner, shown.name, shown.seed) == ("alice", "qwen", 2**40)
    assert KEY not in shown.model_dump_json() and not {"api_key", "api_key_sealed"} & set(shown.model_dump())
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT * FROM modelpreset")).mappings().all()
    assert len(rows) == 1 and rows[0]["api_key_sealed"] and KEY not in repr(rows)
    assert presets.config_of(presets.get("alice", "qwen")) == every_field()  # every setting, and the key opened

    assert [p.name for p in presets.list("alice")] == ["qwen"] and presets.list("bob") == []
    with pytest.raises(NotFoundError) as unknown:
        presets.get("bob", "qwen")
    assert unknown.value.code == "preset_unknown"


@pytest.mark.databases
def test_a_replaced_preset_keeps_its_key_unless_given_another_or_none(engine: Engine) -> None:
    presets = ModelPresets(engine, Sealer(b"one secret"))
    presets.save("alice", "m", ModelConfig(base_url=URL, model="one", api_key=KEY))

    replaced = presets.save("alice", "m", ModelConfig(base_url=URL, model="two"))
    key = presets.config_of(replaced).api_key
    assert replaced.model == "two" and key is not None and key.get_secret_value() == KEY
    other = presets.config_of(presets.save("alice", "m", ModelConfig(base_url=URL, model="two", api_key="sk-other")))
    assert other.api_key == SecretStr("sk-other")
    cleared = presets.save("alice", "m", ModelConfig(base_url=URL, model="two", api_key=None))
    assert not presets.public(cleared).has_api_key and presets.config_of(cleared).api_key is None

    presets.delete("alice", "m")
    assert presets.list("alice") == []
    with pytest.raises(NotFoundError):
        presets.delete("alice", "m")


def test_a_key_sealed_with_another_secret_must_be_saved_again(engine: Engine) -> None:
    ModelPresets(engine, Sealer(b"before the restart")).save("alice", "m", every_field())
    after = ModelPresets(engine, Sealer(b"after the restart"))
    with pytest.raises(ConflictError) as refused:
        after.config_of(after.get("alice", "m"))
    assert refused.value.code == "preset_key_sealed_elsewhere"
    assert after.public(after.get("alice", "m")).has_api_key  # still listed, to be saved again


def test_names_must_fit_a_url_and_an_owner_keeps_at_most_a_hundred(engine: Engine) -> None:
    presets = ModelPresets(engine, Sealer(b"one secret"))
    for bad in ("", "a b", "../etc", "-dash", "x" * 65):
        with pytest.raises(InvalidInputError) as refused:
            presets.save("alice", bad, every_field())
        assert refused.value.code == "preset_name_invalid"
    for index in range(MAX_PRESETS_PER_OWNER):
        presets.save("alice", f"m{index}", every_field())
    with pytest.raises(TooManyRequestsError) as limited:
        presets.save("alice", "one-more", every_field())
    assert limited.value.code == "presets_limit"
    presets.save("alice", "m0", every_field(model="replaced"))  # replacing one is not one more
    presets.save("bob", "m0", every_field())  # the limit is per owner


@pytest.mark.databases
def test_migration_0008_adds_the_table_to_a_catalog_at_0007_and_takes_it_away(database_url: str) -> None:
    engine = create_db_engine(database_url)

    def migrate(to: str, *, down: bool = False) -> set[str]:
        with exclusive(engine, MIGRATION_LOCK) as connection:
            (command.downgrade if down else command.upgrade)(migration_config(connection), to)
        return set(inspect(engine).get_table_names())

    try:
        assert "modelpreset" not in migrate("0007")
        assert "modelpreset" in migrate("0008")
        columns = {c["name"] for c in inspect(engine).get_columns("modelpreset")}
        assert {"owner", "name", "base_url", "model", "seed", "system_prompt", "api_key_sealed"} <= columns
        assert "modelpreset" not in migrate("0007", down=True)
        init_db(engine)  # as serve does: to the newest revision, whose columns today's presets need
        presets = ModelPresets(engine, Sealer(b"one secret"))
        assert presets.list("alice") == []
        presets.save("alice", "m", every_field())
        assert [p.name for p in presets.list("alice")] == ["m"]
    finally:
        engine.dispose()


# -- the API, served on loopback with the built-in templates and a fake model server


@pytest.fixture
def evaluating(settings: Settings, hub: FakeHub, tmp_path: Path) -> Iterator[Envhub]:
    hub.users["hf_bob"] = "bob"
    update = {"data_dir": tmp_path / "data", "templates_dir": TEMPLATES, "allow_private_urls": True}
    server = Envhub(settings.model_copy(update=update | {"max_endpoints_per_owner": 10}))
    yield server
    server.stop()


def start(envhub: Envhub, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    response = envhub.http.post("/api/evaluations", json=body, headers=headers)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def test_presets_are_their_owners_and_a_run_names_one(evaluating: Envhub, model: FakeModel) -> None:
    http = evaluating.http
    saved = http.put(
        "/api/models/fake", json={"base_url": model.url, "model": "fake-1", "api_key": KEY, "temperature": 0.5},
        headers=ALICE,
    )  # fmt: skip
    assert saved.status_code == 200, saved.text
    assert saved.json()["has_api_key"] is True and KEY not in saved.text and "api_key" not in saved.json()
    listed = http.get("/api/models", headers=ALICE).json()
    assert (listed["count"], listed["data"][0]["name"], listed["data"][0]["has_api_key"]) == (1, "fake", True)
    assert listed["data"][0]["owner"] == "alice" and KEY not in json.dumps(listed)

    # Nobody else sees it or plays with it: not bob, not the server's local presets (sign-in is off here).
    assert http.get("/api/models", headers=BOB).json() == {"data": [], "count": 0}
    assert http.get("/api/models").json() == {"data": [], "count": 0}
    assert http.get("/api/models/fake", headers=BOB).status_code == 404
    for headers in (BOB, {}):
        refused = http.post(
            "/api/evaluations", json={"environment": "template:wordle", "policy": {"preset": "fake"}}, headers=headers
        )
        assert (refused.status_code, refused.json()["code"]) == (404, "preset_unknown")
    assert http.delete("/api/models/fake", headers=BOB).status_code == 404

    run = finished(
        evaluating, start(evaluating, ALICE, environment="template:wordle", policy={"preset": "fake"}, episodes=1)["id"]
    )
    assert run["status"] == "finished", run["message"]
    assert (run["policy"]["model"], run["policy"]["temperature"], run["owner"]) == ("fake-1", 0.5, "alice")
    assert model.requests and {h["authorization"] for h, _ in model.requests} == {f"Bearer {KEY}"}

    # Replaced without a key, it keeps the key; deleted, it is gone for runs too.
    kept = http.put("/api/models/fake", json={"base_url": model.url, "model": "fake-2"}, headers=ALICE).json()
    assert (kept["model"], kept["has_api_key"]) == ("fake-2", True)
    assert http.delete("/api/models/fake", headers=ALICE).status_code == 204
    assert http.get("/api/models", headers=ALICE).json()["count"] == 0
    gone = http.post(
        "/api/evaluations", json={"environment": "template:wordle", "policy": {"preset": "fake"}}, headers=ALICE
    )
    assert gone.status_code == 404


def test_with_sign_in_on_saving_needs_a_user_or_the_admin(settings: Settings, tmp_path: Path) -> None:
    body = {"base_url": URL, "model": "m", "api_key": KEY}
    with TestClient(create_app(oauth_settings(settings, data_dir=tmp_path / "data"))) as client:
        for response in (client.put("/api/models/m", json=body), client.get("/api/models")):
            assert (response.status_code, response.json()["code"]) == (401, "sign_in_required")
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        assert client.put("/api/models/m", json=body, headers=admin).json()["owner"] == ":local"
        assert [p["name"] for p in client.get("/api/models", headers=admin).json()["data"]] == ["m"]
        bad = client.put("/api/models/m", json=body | {"base_url": "file:///etc"}, headers=admin)
        assert (bad.status_code, bad.json()["code"]) == (422, "invalid_request")


@pytest.mark.slow  # starts envhub and its CLI as processes; the API's runs of a preset: the tests above
def test_the_cli_evaluates_a_preset_saved_on_the_server(tmp_path: Path) -> None:
    fake = FakeModel(generic_brain)
    env = cli_env(tmp_path, "http://127.0.0.1:9") | {
        "ENVHUB_TEMPLATES_DIR": str(TEMPLATES),
        "ENVHUB_DATA_DIR": str(tmp_path / "data"),
        "ENVHUB_SESSION_SECRET": "the server's secret",
    }
    server = Settings(database_url=env["ENVHUB_DATABASE_URL"], session_secret=SecretStr("the server's secret"))
    engine = create_db_engine(server.database_url)
    init_db(engine)
    ModelPresets(engine, Sealer(session_secret(server))).save(
        ":local", "fake", ModelConfig(base_url=fake.url, model="cli-preset", api_key=KEY)
    )  # as PUT /api/models/fake does without sign-in
    engine.dispose()
    try:
        played = run_cli(env, "eval", "template:wordle", "--preset", "fake", "--episodes", "1", "--max-steps", "2")
        missing = run_cli(env, "eval", "template:wordle", "--preset", "nope")
    finally:
        fake.close()
    assert played.returncode == 0, played.stderr
    assert "policy        cli-preset" in played.stdout and KEY not in played.stdout + played.stderr
    assert fake.requests and {h["authorization"] for h, _ in fake.requests} == {f"Bearer {KEY}"}
    assert missing.returncode == 1 and "you have no model preset 'nope'" in missing.stderr


# -- the key never leaves envhub


@contextmanager
def every_logger_at_debug(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Every logger there is, envhub's and its libraries', at DEBUG into caplog; those that keep their records to
    themselves (uvicorn's) too. Loggers made later inherit DEBUG from the root or their parents."""
    loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)]
    caplog.set_level(logging.DEBUG)
    for logger in loggers:
        caplog.set_level(logging.DEBUG, logger.name)
    apart = [logger for logger in loggers if not logger.propagate]
    for logger in apart:
        logger.addHandler(caplog.handler)
    try:
        yield
    finally:
        for logger in apart:
            logger.removeHandler(caplog.handler)


def test_the_api_key_never_appears_in_any_response_log_or_download(
    evaluating: Envhub, model: FakeModel, hub: FakeHub, caplog: pytest.LogCaptureFixture
) -> None:
    bodies: list[str] = []

    def keep(response: httpx.Response) -> None:
        response.read()
        bodies.append(response.text)

    http = evaluating.http
    http.event_hooks["response"].append(keep)
    with every_logger_at_debug(caplog):
        typed = {"model": {"base_url": model.url, "model": "fake-typed", "api_key": KEY}}
        assert http.put("/api/models/saved", json={"base_url": model.url, "model": "fake-saved", "api_key": KEY},
                        headers=ALICE).status_code == 200  # fmt: skip
        runs = [
            finished(evaluating, start(evaluating, ALICE, environment="template:wordle", policy=policy, episodes=2,
                                       max_steps=2)["id"])
            for policy in (typed, {"preset": "saved"})
        ]  # fmt: skip
        pushed: list[bytes] = []
        for run in runs:
            assert run["status"] == "finished", run["message"]
            for episode in run["episodes"]:
                http.get(f"/api/evaluations/episodes/{run['id']}-{episode['index']}")
            http.get(f"/api/evaluations/{run['id']}/episodes.jsonl")
            http.get(f"/api/endpoints/{run['endpoint']}")  # with its server's log
            repo = f"alice/rollouts-{run['id']}"
            assert http.post(f"/api/evaluations/{run['id']}/push", json={"repo": repo}, headers=ALICE).is_success
            pushed.extend(hub.files(repo, repo_type="dataset").values())
        http.get("/api/evaluations")
        http.get("/api/environments/template:wordle/leaderboard")
        http.get("/api/models", headers=ALICE)
        http.get("/api/models/saved", headers=ALICE)

    # The key was in play: the model server got it on every request, from both runs.
    assert {body["model"] for _, body in model.requests} == {"fake-typed", "fake-saved"}
    assert {h["authorization"] for h, _ in model.requests} == {f"Bearer {KEY}"}
    assert any(r.levelno == logging.DEBUG for r in caplog.records)  # the logs were captured at DEBUG
    assert len(bodies) >= 12 and len(pushed) >= 4

    engine = create_db_engine(evaluating.settings.database_url)
    with engine.connect() as connection:
        sealed = connection.execute(text("SELECT api_key_sealed FROM modelpreset")).scalar_one()
        stored = [repr(connection.execute(t.select()).all()) for t in SQLModel.metadata.sorted_tables]
    engine.dispose()
    for where, found in [
        ("an API response", "\n".join(bodies)),
        ("a file pushed to the Hub", b"\n".join(pushed).decode()),
        ("the logs", caplog.text + "\n".join(str(r.args) for r in caplog.records)),
        ("the database", "\n".join(stored).replace(sealed, "")),
    ]:
        assert KEY not in found, f"the API key is in {where}"
    assert sealed not in "\n".join(bodies)  # (SQLAlchemy's DEBUG log shows the rows it reads, sealed)
