"""A real TRL GRPO run (examples/grpo_envhub.py, trl 1.16 on a CPU) through envhub endpoint URLs: the endpoints'
figures count what the trainer played, and the reward it logged is the environment's."""

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import REPO_ROOT, Settings
from tests.conftest import needs_trainer, wait_until
from tests.serving import TEMPLATES, Envhub

pytestmark = needs_trainer

EXAMPLE = REPO_ROOT / "examples" / "grpo_envhub.py"
BATCH = 4  # the example's default: rollouts per step, and sessions TRL holds on an endpoint
STEP_COST = 0.01  # what a move costs in the maze template (spaces_templates/maze/server/environment.py)


@pytest.fixture(scope="module")
def envhub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    scratch = tmp_path_factory.mktemp("trl")
    settings = Settings(
        database_url=f"sqlite:///{scratch / 'envhub.db'}",
        data_dir=scratch / "data",
        templates_dir=TEMPLATES,
        extra_templates="",
        hf_endpoint="http://127.0.0.1:9",
        sync_interval_s=0,
        health_interval_s=0,
        quality_interval_s=0,
    )
    envhub = Envhub(settings)
    try:
        yield envhub
    finally:
        envhub.end_endpoints()
        envhub.stop()


def maze(envhub: Envhub) -> dict[str, Any]:
    """A maze endpoint whose pool knows at once that it holds a training batch."""
    return envhub.running("template:maze", options={"env": {"MAX_CONCURRENT_ENVS": str(2 * BATCH)}})


def train(python: Path, urls: list[str], steps: int, tmp_path: Path) -> list[dict[str, Any]]:
    """Run the example in the trainer's virtualenv on the CPU, one thread; the rewards it logged, one per step."""
    output = tmp_path / "run"
    command = [str(python), str(EXAMPLE), *[f"--url={url}" for url in urls], f"--steps={steps}"]
    command.append(f"--output-dir={output}")
    cpu = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=os.environ | cpu, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    state = json.loads((output / "trainer_state.json").read_text())
    assert state["global_step"] == steps
    logged = [entry for entry in state["log_history"] if "reward" in entry]
    assert [entry["step"] for entry in logged] == list(range(1, steps + 1))
    return logged


def settled(envhub: Envhub, endpoint_id: str) -> dict[str, Any]:
    """The endpoint's figures once the trainer's sessions have closed."""
    wait_until(lambda: envhub.endpoint(endpoint_id)["stats"]["active_sessions"] == 0, timeout_s=30)
    stats: dict[str, Any] = envhub.endpoint(endpoint_id)["stats"]
    return stats


def test_grpo_trains_through_the_endpoint_url(envhub: Envhub, trainer_python: Path, tmp_path: Path) -> None:
    endpoint = maze(envhub)
    logged = train(trainer_python, [endpoint["url"]], 3, tmp_path)

    stats = settled(envhub, endpoint["id"])
    # TRL holds one session per rollout of a batch for the whole run; the tiny model's warm-up looks at the maze once.
    assert stats["sessions"] == BATCH + 1
    assert stats["errors"] == 0
    assert stats["steps"] > 0
    # A move costs 0.01 and the exit is 20 moves away, more than a 128-token completion holds: every step counted
    # through the URL is in the logged reward, and nothing else is.
    assert sum(entry["reward"] * BATCH for entry in logged) == pytest.approx(-STEP_COST * stats["steps"], abs=1e-6)


@pytest.mark.slow  # a second GRPO run; the URL a trainer holds is trained through in the test above
def test_grpo_trains_on_two_endpoints_as_trls_environments(
    envhub: Envhub, trainer_python: Path, tmp_path: Path
) -> None:
    """TRL's multi-environment form: a dict of classes, one per endpoint URL, the dataset's rows taking them in
    turn (step 1 the first endpoint, step 2 the second)."""
    first, second = maze(envhub), maze(envhub)
    logged = train(trainer_python, [first["url"], second["url"]], 2, tmp_path)

    for endpoint, entry, looked in [(first, logged[0], 1), (second, logged[1], 0)]:
        stats = settled(envhub, endpoint["id"])
        assert stats["sessions"] == BATCH + looked
        assert stats["errors"] == 0
        assert stats["steps"] > 0
        assert entry["reward"] * BATCH == pytest.approx(-STEP_COST * stats["steps"], abs=1e-6)
