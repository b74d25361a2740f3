"""The statistical lane plays a declared script oracle in the environment's image (built and run on the Docker engine,
its container removed after), judges reachability on its rewards, and names why when it cannot play it."""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import REPO_ROOT, Settings
from tests.serving import Envhub
from tests.test_containers import BASE_IMAGE, needs_docker
from tests.test_statistical import report_of, results
from tests.test_template_validation import TEMPLATES, validation_containers

SEEDS = 3
SETTINGS = {
    "statistical_episodes": SEEDS,
    "statistical_replays": 1,
    "docker_base_image": BASE_IMAGE,
    "launch_timeout_s": 120,
}
FAILING_ORACLE = "import sys\n\nsys.exit(3)\n"


def write_broken_oracle(root: Path) -> Path:
    """wordle, whose declared oracle script exits 3 before it plays."""
    folder = root / "broken_oracle"
    shutil.copytree(TEMPLATES / "wordle", folder)
    manifest = folder / "openenv.yaml"
    manifest.write_text(manifest.read_text().replace("name: wordle", "name: broken_oracle"))
    (folder / "validation" / "oracle.py").write_text(FAILING_ORACLE)
    return folder


@pytest.fixture(scope="module")
def lane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    """envhub with the built-in templates and the broken oracle, building images from the test base image."""
    root = tmp_path_factory.mktemp("oracle")
    write_broken_oracle(root / "envs")
    server = Envhub(
        Settings(
            database_url=f"sqlite:///{root}/envhub.db",
            data_dir=root / "data",
            templates_dir=TEMPLATES,
            extra_templates=str(root / "envs"),
            hf_endpoint="http://127.0.0.1:9",
            sync_interval_s=0,
            allow_private_urls=True,
        ).model_copy(update=SETTINGS)
    )
    yield server
    server.end_endpoints()
    server.stop()


def reachability(filed: dict[str, Any]) -> dict[str, Any]:
    reach: dict[str, Any] = results(filed)["statistical.reward_reachability"]
    return reach


@needs_docker
@pytest.mark.timeout(900)  # a first build installs the template's requirements
def test_a_templates_oracle_plays_in_its_image_and_reaches_the_maximum(lane: Envhub) -> None:
    before = validation_containers()
    filed = report_of(lane, "wordle")
    reach = reachability(filed)
    assert reach["status"] == "pass", reach
    measured = reach["measured"]
    assert (measured["oracle"], measured["seeds"], measured["rewards"]) == ("played", [0, 1, 2], [1.0] * SEEDS)
    assert measured["best_reward"] == measured["declared_max"] == 1.0
    [oracle] = [p for p in filed["report"]["statistics"]["players"] if p["kind"] == "oracle"]
    assert (oracle["episodes"], oracle["mean_reward"], oracle["evaluation"]) == (SEEDS, 1.0, "")
    headroom = results(filed)["statistical.headroom"]["measured"]
    assert headroom["best_mean"] < 1.0  # the oracle stays out of headroom: it is no policy to learn from
    assert validation_containers() == before


@needs_docker
@pytest.mark.timeout(900)
def test_an_oracle_script_that_fails_is_named_and_the_players_stand_in(lane: Envhub) -> None:
    before = validation_containers()
    filed = report_of(lane, "broken_oracle")
    measured = reachability(filed)["measured"]
    assert measured["oracle"] == "script_failed"
    assert "seeds" not in measured and measured["episodes"]  # judged on the best honest episode, as without one
    episode = lane.http.get(f"/api/evaluations/episodes/{measured['episodes'][0]}")
    assert episode.status_code == 200 and episode.json()["reward"] == measured["best_reward"]
    assert all(p["kind"] != "oracle" for p in filed["report"]["statistics"]["players"])
    assert validation_containers() == before


def test_without_a_docker_engine_the_oracle_is_named_unplayed_and_the_lane_runs(tmp_path: Path) -> None:
    write_broken_oracle(tmp_path / "envs")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVHUB_", "HF_"))}
    env |= {
        "ENVHUB_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
        "ENVHUB_DATA_DIR": str(tmp_path / "data"),
        "ENVHUB_TEMPLATES_DIR": str(tmp_path / "none"),
        "ENVHUB_EXTRA_TEMPLATES": str(tmp_path / "envs"),
        "ENVHUB_STATISTICAL_EPISODES": str(SEEDS),
        "ENVHUB_STATISTICAL_REPLAYS": "1",
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "DOCKER_HOST": f"unix://{tmp_path / 'no-engine.sock'}",
    }
    command = [sys.executable, "-m", "app", "statistics", "template:broken_oracle", "--json"]
    printed = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    filed = json.loads(printed.stdout)
    assert filed["report"]["status"] == "finished", printed.stderr
    measured = reachability(filed)["measured"]
    assert measured["oracle"] == "no_docker" and measured["episodes"]
    assert len(filed["report"]["results"]) == 7
