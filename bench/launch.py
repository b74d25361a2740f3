"""Time from POST /api/endpoints to `running`, for the process and docker backends.

    .venv/bin/python -m bench.launch [--repeat 5] [--docker]

The docker run needs an engine and the base image (shared/scripts/docker-engine.sh);
the image is built once before timing, so the figure is a launch with a built image.
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

from app.settings import Settings
from bench.report import load_average, machine_line, percentile, table, verdict
from tests.environments import write_count_env
from tests.serving import Envhub

FLOOR_S = 3.0


def launch_once(envhub: Envhub, environment: str, backend: str) -> float:
    started = time.perf_counter()
    endpoint = envhub.launch(environment, backend=backend)
    while (current := envhub.endpoint(endpoint["id"]))["status"] == "starting":
        time.sleep(0.01)
    elapsed = time.perf_counter() - started
    if current["status"] != "running":
        raise RuntimeError(f"{backend} launch failed: {current['message']}")
    envhub.http.delete(f"/api/endpoints/{endpoint['id']}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--docker", action="store_true", help="also time the docker backend")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envhub-bench-") as scratch:
        templates = Path(scratch) / "templates"
        write_count_env(templates / "count")
        settings = Settings(
            database_url=f"sqlite:///{scratch}/envhub.db",
            data_dir=Path(scratch) / "data",
            templates_dir=templates,
            hf_endpoint="http://127.0.0.1:9",
            sync_interval_s=0,
            docker_base_image=os.environ.get("BASE_IMAGE", "envhub/python-base:3.11"),
            launch_timeout_s=600,
        )
        envhub = Envhub(settings)
        rows = []
        try:
            backends = ["process", "docker"] if args.docker else ["process"]
            for backend in backends:
                if backend == "docker":
                    launch_once(envhub, "template:count", backend)  # builds the image once
                times = [launch_once(envhub, "template:count", backend) for _ in range(args.repeat)]
                p50 = percentile(times, 0.5)
                rows.append([backend, len(times), min(times), p50, max(times), verdict(p50 <= FLOOR_S)])
        finally:
            envhub.stop()
    print(machine_line())
    print(f"load average before: {load_average()}")
    print(table(["backend", "launches", "min s", "p50 s", "max s", f"p50 ≤ {FLOOR_S:g} s"], rows))


if __name__ == "__main__":
    main()
