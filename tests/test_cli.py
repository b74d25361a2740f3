"""The command line, run as a user runs it: real subprocesses against the fake Hub."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from app.settings import REPO_ROOT
from core.db import create_db_engine
from evals.store import EvaluationStore
from tests.conftest import space_files
from tests.fakehub import FakeHub
from tests.fakemodel import FakeModel, Reply
from tests.serving import TEMPLATES


def cli_env(tmp_path: Path, endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVHUB_", "HF_"))}
    return env | {
        "HF_ENDPOINT": endpoint,
        "HF_HOME": str(tmp_path / "hf_home"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "ENVHUB_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
        "ENVHUB_TEMPLATES_DIR": str(tmp_path / "no-templates"),
        "ENVHUB_HUB_BACKOFF_S": "0.01",
        "ENVHUB_HUB_TIMEOUT_S": "2",
        "ENVHUB_QUALITY_INTERVAL_S": "0",  # as in every envhub the tests start (see conftest)
    }


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_sync_then_search(hub: FakeHub, tmp_path: Path) -> None:
    hub.add_space("alice/chess", files=space_files("Chess"), likes=4)
    hub.add_space("bob/wordle", files=space_files("Wordle"), likes=2)
    env = cli_env(tmp_path, hub.url)

    synced = run_cli(env, "sync")

    assert synced.returncode == 0, synced.stderr
    assert synced.stdout.strip().splitlines()[-1] == (
        "sync ok: 2 added, 0 updated, 0 unchanged, 0 removed, 0 failed, 0 datasets; "
        + synced.stdout.split("datasets; ")[1].strip()
    )
    assert "requests in" in synced.stdout
    assert "downloading cards" in synced.stderr  # the progress bar

    again = run_cli(env, "sync")
    assert "0 added, 0 updated, 2 unchanged" in again.stdout

    found = run_cli(env, "search", "chess", "--json")
    assert found.returncode == 0, found.stderr
    body = json.loads(found.stdout)
    assert (body["count"], body["data"][0]["id"]) == (1, "alice/chess")

    table = run_cli(env, "search", "--sort", "likes")
    assert table.stdout.index("alice/chess") < table.stdout.index("bob/wordle")
    assert table.stdout.strip().endswith("2 found")


def test_sync_against_an_unreachable_hub_says_why(tmp_path: Path) -> None:
    failed = run_cli(cli_env(tmp_path, "http://127.0.0.1:9"), "sync", "--quiet")
    assert failed.returncode == 1
    last = failed.stdout.strip().splitlines()[-1]
    assert last.startswith("sync failed after")
    assert "listing spaces at http://127.0.0.1:9 failed" in last
    assert "Traceback" not in failed.stderr


def test_a_search_that_finds_nothing_says_what_is_indexed(tmp_path: Path) -> None:
    env = cli_env(tmp_path, "http://127.0.0.1:9") | {"ENVHUB_TEMPLATES_DIR": str(TEMPLATES)}
    found = run_cli(env, "search", "chess")
    assert found.returncode == 0
    assert found.stdout.splitlines() == [
        "0 found",
        "The catalog holds 6 environments: 6 built-in (no Hub Spaces yet: the Hub has not been synced).",
        "Index the Hub's environment Spaces with: python -m app sync",
    ]
    assert found.stderr == ""  # no migration or indexing lines


def test_eval_plays_a_template_with_a_model_and_records_the_run(tmp_path: Path) -> None:
    key = "sk-cli-secret-42"
    fake = FakeModel(lambda body: Reply(text='```json\n{"guess": "crane"}\n```'))
    env = cli_env(tmp_path, "http://127.0.0.1:9") | {
        "ENVHUB_TEMPLATES_DIR": str(TEMPLATES),
        "ENVHUB_DATA_DIR": str(tmp_path / "data"),
        "MODEL_KEY": key,
    }
    try:
        args = ["template:wordle", "--model-url", fake.url, "--model", "cli-model", "--api-key-env", "MODEL_KEY"]
        played = run_cli(env, "eval", *args, "--episodes", "3", "--concurrency", "3", "--max-steps", "2")
    finally:
        fake.close()
    assert played.returncode == 0, played.stderr
    assert "policy        cli-model" in played.stdout and "status        finished" in played.stdout
    assert "episodes      3 of 3" in played.stdout and "mean steps    2.0" in played.stdout
    assert "3/3" in played.stderr  # the progress bar
    assert "alembic" not in played.stderr and "INFO" not in played.stderr  # only what was asked for
    assert re.search(r"wall time     \d+\.\d s, \d+\.\d s with the server's start", played.stdout)
    assert key not in played.stdout + played.stderr
    assert {headers["authorization"] for headers, _ in fake.requests} == {f"Bearer {key}"}
    # The run is in the catalog the server reads, for its leaderboard.
    engine = create_db_engine(env["ENVHUB_DATABASE_URL"])
    [run] = EvaluationStore(engine).list_runs(lambda run: True, environment="template:wordle")
    engine.dispose()
    assert (run.status, run.policy_label, run.summary["episodes"], run.launched) == ("finished", "cli-model", 3, True)

    missing = run_cli(env, "eval", "template:wordle", "--model-url", fake.url, "--model", "m", "--api-key-env", "NOPE")
    assert missing.returncode == 2 and "$NOPE is empty" in missing.stderr
