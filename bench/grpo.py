"""Seconds per GRPO training step through an envhub endpoint URL, against the same run straight to its server.

    .venv/bin/python -m bench.grpo [--pairs 5] [--steps 20]

envhub runs as its own process with one maze endpoint (a process server). examples/grpo_envhub.py runs in the
trainer's virtualenv (tests/trainer_venv.py) on the CPU, one thread, with the tiny model built and warmed up once and
the same seed every run, so both paths train on the same rollouts: in turn against the endpoint's URL (the gateway)
and its replica's own address (`internal_url`, what the gateway forwards to). A step's seconds are TRL's `step_time`
(generation with its resets and moves, then the update); the first step of a run also opens the batch's sessions.
The verdict compares the median step of each path over all runs, which other work on a shared machine moves least.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from app.settings import REPO_ROOT
from bench.envhub import envhub_process
from bench.report import load_average, machine_line, table, verdict
from tests.trainer_venv import build as trainer_venv

EXAMPLE = REPO_ROOT / "examples" / "grpo_envhub.py"
CPU = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
WARM_UP = "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; from grpo_envhub import tiny_model; "
WARM_UP += "tiny_model(sys.argv[2], 0, 6, Path(sys.argv[3]))"


def launch(envhub: str) -> dict[str, Any]:
    body = {"environment": "template:maze", "options": {"env": {"MAX_CONCURRENT_ENVS": "8"}}}
    endpoint: dict[str, Any] = httpx.post(f"{envhub}/api/endpoints", json=body).json()
    while endpoint["status"] == "starting":
        time.sleep(0.05)
        endpoint = httpx.get(f"{envhub}/api/endpoints/{endpoint['id']}").json()
    if endpoint["status"] != "running":
        raise RuntimeError(f"launch failed: {endpoint['message']}")
    return endpoint


def train(python: Path, model: Path, url: str, steps: int, output: Path) -> tuple[list[float], float]:
    """One run of the example; the seconds of each of its steps, and its moves per rollout."""
    command = [str(python), str(EXAMPLE), f"--url={url}", f"--model={model}", f"--steps={steps}"]
    command.append(f"--output-dir={output}")
    subprocess.run(command, env=os.environ | CPU, check=True, capture_output=True)
    history = json.loads((output / "trainer_state.json").read_text())["log_history"]
    logged = [entry for entry in history if "step_time" in entry]
    return [entry["step_time"] for entry in logged], statistics.mean(e["tools/call_frequency"] for e in logged)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5, help="runs through the gateway, each beside one direct")
    parser.add_argument("--steps", type=int, default=20, help="training steps per run")
    args = parser.parse_args()
    python = trainer_venv()
    print(machine_line())
    print(f"load average before: {load_average()}")
    rows: list[list[object]] = []
    seconds: dict[str, list[float]] = {"gateway": [], "direct": []}
    with (
        tempfile.TemporaryDirectory(prefix="envhub-bench-") as scratch,
        envhub_process(Path(scratch), REPO_ROOT / "spaces_templates") as envhub,
    ):
        endpoint = launch(envhub)
        urls = {"gateway": endpoint["url"], "direct": endpoint["internal_url"]}
        model = Path(scratch) / "tiny"
        warm_up = [str(python), "-c", WARM_UP, str(EXAMPLE.parent), urls["gateway"], str(model)]
        subprocess.run(warm_up, env=os.environ | CPU, check=True, capture_output=True)
        for path, url in urls.items():  # untimed: the first run after the warm-up was slow whichever path it took
            train(python, model, url, 2, Path(scratch) / f"untimed-{path}")
        for pair in range(args.pairs):
            order = ["gateway", "direct"] if pair % 2 == 0 else ["direct", "gateway"]
            for path in order:
                output = Path(scratch) / f"run-{pair}-{path}"
                steps, moves = train(python, model, urls[path], args.steps, output)
                seconds[path] += steps
                rows.append([pair + 1, path, steps[0], statistics.median(steps), statistics.mean(steps), moves])
        stats = httpx.get(f"{envhub}/api/endpoints/{endpoint['id']}").json()["stats"]
    print(table(["pair", "path", "first step s", "median s", "mean s", "moves/rollout"], rows))
    print(f"the endpoint counted {stats['sessions']} sessions, {stats['steps']} steps, {stats['errors']} errors")
    ratio = statistics.median(seconds["gateway"]) / statistics.median(seconds["direct"])
    mean_ratio = statistics.mean(seconds["gateway"]) / statistics.mean(seconds["direct"])
    print(f"load average after: {load_average()}")
    print(f"mean step through the gateway: {mean_ratio:.3f}x direct")
    print(f"median step through the gateway: {ratio:.3f}x direct ({verdict(ratio <= 1.05)}, floor 1.05x)")


if __name__ == "__main__":
    main()
