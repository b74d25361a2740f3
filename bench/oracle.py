"""The oracle player's cost on a built-in template, as the statistical lane plays it: the image built once, the
subject started, then the script run once per seed, then the container removed.

    .venv/bin/python -m bench.oracle [--template wordle] [--seeds 8] [--base-image envhub/python-base:3.11]

The template is copied with one added file, so that its code layer is built anew (the requirements layer is the
engine's cache, as on any machine that built the template before); a second build of the same folder is the cache
hit a later report gets. The copy's image is removed at the end.
"""

import argparse
import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

import yaml
from openenv.validation.manifest import ExecutionDeclaration, ResourceDeclaration
from openenv.validation.runtime.contracts import LaunchSpec

from app.settings import REPO_ROOT
from bench.report import load_average, machine_line, table
from conformance.validator.provider import EnvhubValidationProvider
from hosting.runtimes.engine import engine_client

TEMPLATES = REPO_ROOT / "spaces_templates"
T = TypeVar("T")


def timed(work: Callable[[], T]) -> tuple[T, float]:
    started = time.perf_counter()
    return work(), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--template", default="wordle")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--base-image", default="envhub/python-base:3.11")
    args = parser.parse_args()
    print(machine_line())
    print(f"load average at the start: {load_average()}")
    client = engine_client()
    provider = EnvhubValidationProvider(client, args.base_image)
    with tempfile.TemporaryDirectory(prefix="bench-oracle-") as scratch:
        folder = Path(scratch) / args.template
        shutil.copytree(TEMPLATES / args.template, folder)
        (folder / "bench-marker.txt").write_text(uuid.uuid4().hex)
        validation = yaml.safe_load((folder / "openenv.yaml").read_text())["validation"]
        execution = ExecutionDeclaration.model_validate(validation["execution"])
        resources = ResourceDeclaration.model_validate(validation["resources"])
        location = validation["capabilities"]["oracle"]["location"]
        image, built = timed(lambda: provider.build(folder, execution))
        _, cached = timed(lambda: provider.build(folder, execution))
        launch = {"image_ref": image, "resources": resources, "network": {}, "run_id": "bench-oracle"}
        spec = LaunchSpec.model_validate(launch | {"startup_timeout_s": 120})
        subject, started = timed(lambda: provider.start(spec))
        episodes: list[float] = []
        try:
            for seed in range(args.seeds):
                ran, took = timed(partial(subject.exec, ["python", location, str(seed)], timeout_s=60))
                assert ran.exit_code == 0 and "reward" in json.loads(ran.stdout), ran.stderr
                episodes.append(took)
        finally:
            _, stopped = timed(subject.stop)
        client.images.remove(image, force=True)
    per_episode = sum(episodes) / len(episodes)
    rows: list[list[object]] = [
        ["build (code layer new, requirements cached)", 1, round(built, 2)],
        ["build again (cache hit)", 1, round(cached, 2)],
        ["start until /health answers", 1, round(started, 2)],
        ["one seed's oracle run (mean)", len(episodes), round(per_episode, 2)],
        ["slowest seed", 1, round(max(episodes), 2)],
        ["stop (container removed)", 1, round(stopped, 2)],
        ["total", 1, round(built + started + sum(episodes) + stopped, 2)],
    ]
    print(table(["step", "times", "seconds"], rows))
    print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
