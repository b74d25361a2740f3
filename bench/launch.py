"""Time from POST /api/endpoints to `running`, for the process and docker backends.

    .venv/bin/python -m bench.launch [--repeat 5] [--docker]

The process backend runs twice in one go, each server started from scratch (a new
interpreter) and forked from the zygote (ENVHUB_PROCESS_PRELOAD), launches alternating
so that outside load hits both alike. The zygote's first launch, which starts the
zygote itself, is shown on its own line and left out of the figures.
The docker run needs an engine and the base image (shared/scripts/docker-engine.sh);
the image is built once before timing, so every figure is a launch with a built image:
a new container each time (ENVHUB_DOCKER_SPARES=0), a claimed spare that is up (the
launch waits until the spare answers /health, as when launches are a few seconds
apart), and launches back to back, which claim a spare still starting.
"""

import argparse
import os
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from app.settings import Preload, Settings
from bench.report import load_average, machine_line, percentile, table, verdict
from hosting.runtimes.engine import CATALOG_LABEL, engine_client
from hosting.runtimes.spares import SPARE_LABEL, SPARE_PREFIX
from tests.conftest import wait_until
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


def spare_is_up(catalog: str) -> bool:
    """Whether a spare container of the catalog answers /health."""
    client = engine_client()
    try:
        found = client.containers.list(
            filters={"label": [SPARE_LABEL, f"{CATALOG_LABEL}={catalog}"]}, ignore_removed=True
        )
    finally:
        client.close()
    for container in found:
        ports = container.ports.get("8000/tcp") or []
        if container.name.startswith(SPARE_PREFIX) and ports:
            try:
                return httpx.get(f"http://127.0.0.1:{ports[0]['HostPort']}/health", timeout=1).is_success
            except httpx.TransportError:
                return False
    return False


def row(name: str, times: list[float]) -> list[object]:
    p50 = percentile(times, 0.5)
    return [name, len(times), min(times), p50, max(times), verdict(p50 <= FLOOR_S)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--docker", action="store_true", help="also time the docker backend")
    args = parser.parse_args()
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="envhub-bench-") as scratch, ExitStack() as stack:
        templates = Path(scratch) / "templates"
        write_count_env(templates / "count")

        def envhub(name: str, *, preload: bool) -> Envhub:
            server = Envhub(settings(name, preload=preload))
            stack.callback(server.stop)
            return server

        def settings(name: str, *, preload: bool) -> Settings:
            return Settings(
                database_url=f"sqlite:///{scratch}/{name}.db",
                data_dir=Path(scratch) / name,
                templates_dir=templates,
                hf_endpoint="http://127.0.0.1:9",
                sync_interval_s=0,
                health_interval_s=0,
                quality_interval_s=0,
                docker_base_image=os.environ.get("BASE_IMAGE", "envhub/python-base:3.11"),
                launch_timeout_s=600,
                process_preload=Preload.LAUNCH if preload else Preload.OFF,
                docker_spares=1 if preload else 0,
            )

        scratch_start = envhub("scratch", preload=False)
        forked = envhub("forked", preload=True)
        first = launch_once(forked, "template:count", "process")
        cold: list[float] = []
        warm: list[float] = []
        for _ in range(args.repeat):
            cold.append(launch_once(scratch_start, "template:count", "process"))
            warm.append(launch_once(forked, "template:count", "process"))
        rows = [
            row("process, from scratch", cold),
            row("process, forked from the zygote", warm),
            ["process, zygote's first launch (starts it)", 1, first, first, first, "-"],
        ]
        if args.docker:
            launch_once(scratch_start, "template:count", "docker")  # builds the image once
            new, spare, back_to_back = [], [], []
            catalog = settings("forked", preload=True).catalog_id()
            launch_once(forked, "template:count", "docker")  # starts the first spare
            for _ in cold:
                # Once the spare is up, nothing else starts: the new container has the machine to itself.
                wait_until(lambda: spare_is_up(catalog), timeout_s=120)
                new.append(launch_once(scratch_start, "template:count", "docker"))
                spare.append(launch_once(forked, "template:count", "docker"))
            for _ in cold:
                back_to_back.append(launch_once(forked, "template:count", "docker"))
            rows += [
                row("docker, a new container", new),
                row("docker, claims a spare that is up", spare),
                row("docker, back to back (the spare is still starting)", back_to_back),
            ]
    print(machine_line())
    print(f"load average before: {load_before}; after: {load_average()}")
    print(table(["backend", "launches", "min s", "p50 s", "max s", f"p50 ≤ {FLOOR_S:g} s"], rows))
    print(f"p50 from scratch / p50 forked: {percentile(cold, 0.5) / percentile(warm, 0.5):.1f}×")


if __name__ == "__main__":
    main()
