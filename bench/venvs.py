"""Time a first launch of an environment with one requirement envhub does not have, which makes a virtualenv.

    .venv/bin/python -m bench.venvs [--repeat 3] [--package matplotlib] [--baseline DIR]

Each launch uses a new data folder, so it makes its virtualenv from nothing (pip's own
download cache stays warm, as it is on any machine after the first install). With
--baseline DIR, another checkout of envhub (an earlier commit, say: `git worktree add
DIR <commit>`) is timed in the same run, launches alternating between the two, so outside
load hits both alike; a warm-up launch of each fills pip's cache first and is not counted.
The environment's requirements are openenv and the one extra, as most official
environments write them.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from app.settings import REPO_ROOT
from bench.report import load_average, machine_line, percentile, table
from tests.environments import write_count_env
from tests.serving import free_port


def first_launch(checkout: Path, templates: Path, scratch: Path, package: str) -> float:
    """Serve envhub from a checkout with a new data folder; seconds from POST /api/endpoints to running."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVHUB_", "HF_"))} | {
        "ENVHUB_DATABASE_URL": f"sqlite:///{scratch}/envhub.db",
        "ENVHUB_DATA_DIR": str(scratch / "data"),
        "ENVHUB_TEMPLATES_DIR": str(templates),
        "ENVHUB_SYNC_INTERVAL_S": "0",
        "ENVHUB_HEALTH_INTERVAL_S": "0",
        "ENVHUB_QUALITY_INTERVAL_S": "0",
        "ENVHUB_LAUNCH_TIMEOUT_S": "900",
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    scratch.mkdir(parents=True)
    log = (scratch / "serve.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port)],
        cwd=checkout,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if http.get("/api/health").is_success:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    tail = (scratch / "serve.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"envhub from {checkout} did not start:\n{tail}")
                time.sleep(0.1)
            started = time.perf_counter()
            endpoint = http.post("/api/endpoints", json={"environment": f"template:{package}"}).json()
            while (current := http.get(f"/api/endpoints/{endpoint['id']}").json())["status"] == "starting":
                time.sleep(0.05)
            elapsed = time.perf_counter() - started
            if current["status"] != "running":
                raise RuntimeError(f"the launch from {checkout} failed: {current['message']}")
            http.delete(f"/api/endpoints/{endpoint['id']}")
            return elapsed
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--package", default="matplotlib", help="the one requirement envhub does not have")
    parser.add_argument("--baseline", type=Path, help="another checkout of envhub to time beside this one")
    parser.add_argument("--checkout", type=Path, default=REPO_ROOT, help="the checkout to time (default: this one)")
    args = parser.parse_args()
    checkouts = {f"this checkout ({args.checkout})": args.checkout.resolve()}
    if args.baseline:
        checkouts = {f"baseline ({args.baseline})": args.baseline.resolve()} | checkouts
    load_before = load_average()
    times: dict[str, list[float]] = {name: [] for name in checkouts}
    with tempfile.TemporaryDirectory(prefix="envhub-bench-") as scratch:
        templates = Path(scratch) / "templates"
        folder = write_count_env(templates / args.package, requirements=f"openenv==0.10.0\n{args.package}\n")
        environment = folder / "server" / "environment.py"
        environment.write_text(environment.read_text() + f"\nimport {args.package}  # noqa: F401\n")
        runs = 0
        for round_ in range(args.repeat + 1):  # the first round warms pip's cache
            for name, checkout in checkouts.items():
                runs += 1
                elapsed = first_launch(checkout, templates, Path(scratch) / f"run{runs}", args.package)
                if round_ > 0:
                    times[name].append(elapsed)
    print(machine_line())
    print(f"load average before: {load_before}; after: {load_average()}")
    rows = [[name, len(t), min(t), percentile(t, 0.5), max(t)] for name, t in times.items()]
    print(table([f"first launch with {args.package}", "launches", "min s", "p50 s", "max s"], rows))
    if args.baseline:
        baseline, current = (percentile(t, 0.5) for t in times.values())
        print(f"p50 baseline / p50 this checkout: {baseline / current:.1f}×")


if __name__ == "__main__":
    main()
