"""A restart of envhub with endpoints running: how long until every URL answers again, and how many servers
were adopted and how many started again.

    .venv/bin/python -m bench.restart [--endpoints 16] [--backend process|docker]

Serves `python -m app serve` on a data folder, database and port of its own, launches the count
environment (tests/environments.py) that many times, stops envhub with SIGINT and starts it again
on the same folder, database and port. Timed from the second Popen: envhub answering
/api/health, and every endpoint's URL answering POST /reset. A replica that serves under the id it
had before the restart was adopted; one with a new id was started again.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from app.settings import REPO_ROOT
from bench.report import load_average, machine_line, table
from hosting.runtimes.engine import engine_client
from tests.environments import write_count_env
from tests.serving import free_port

__all__ = ["run"]

BASE_IMAGE = os.environ.get("BASE_IMAGE", "envhub/python-base:3.11")


def _serve(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port)],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _until(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {timeout_s:g} s")
        time.sleep(0.05)


def _answers(url: str, path: str, method: str = "GET") -> bool:
    try:
        return httpx.request(method, f"{url}{path}", json={}, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def _ready(api: str, endpoint_id: str) -> list[str]:
    endpoint = httpx.get(f"{api}/api/endpoints/{endpoint_id}", timeout=30).json()
    if endpoint["status"] not in ("starting", "running"):
        raise RuntimeError(f"endpoint {endpoint_id} is {endpoint['status']}: {endpoint['message']}")
    return [r["id"] for r in endpoint["pool"]["replicas"] if r["status"] == "ready"]


def _launched(
    api: str, envhub: subprocess.Popen[bytes], backend: str, endpoints: int, launched: list[str]
) -> tuple[dict[str, list[str]], float]:
    """Launch the endpoints (their ids into `launched`), play each once, then SIGINT: the ready replicas of each,
    and the seconds envhub took to stop."""
    try:
        _until(lambda: _answers(api, "/api/health"), 120, "envhub")
        for _ in range(endpoints):
            body = {"environment": "template:count", "backend": backend}
            launched.append(httpx.post(f"{api}/api/endpoints", json=body, timeout=60).json()["id"])
        _until(lambda: all(_ready(api, e) for e in launched), 900, "every endpoint running")
        before = {e: _ready(api, e) for e in launched}
        assert all(_answers(f"{api}/endpoints/{e}", "/reset", "POST") for e in launched)
    finally:
        stopping = time.perf_counter()
        envhub.send_signal(signal.SIGINT)
        envhub.wait(timeout=120)
    return before, time.perf_counter() - stopping


def _restarted(env: dict[str, str], port: int, api: str, launched: list[str]) -> dict[str, Any]:
    """envhub started again: seconds until it answers and until every URL does, and each one's ready replicas."""
    started = time.perf_counter()
    envhub = _serve(env, port)
    try:
        _until(lambda: _answers(api, "/api/health"), 120, "envhub again")
        healthy_s = time.perf_counter() - started
        waiting = {f"{api}/endpoints/{e}" for e in launched}

        def every_url_answers() -> bool:
            waiting.difference_update({url for url in waiting if _answers(url, "/reset", "POST")})
            return not waiting

        _until(every_url_answers, 900, "every URL answering again")
        answered_s = time.perf_counter() - started
        return {"healthy s": healthy_s, "every URL s": answered_s, "ready": {e: _ready(api, e) for e in launched}}
    finally:
        envhub.send_signal(signal.SIGINT)
        envhub.wait(timeout=120)


def _remove_containers(launched: list[str]) -> None:
    client = engine_client()
    for container in client.containers.list(all=True, ignore_removed=True):
        if any(container.name.startswith(f"envhub-{e}") for e in launched):
            container.remove(force=True)


def run(endpoints: int, backend: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="envhub-bench-restart-") as scratch:
        folder = Path(scratch)
        write_count_env(folder / "templates" / "count")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVHUB_", "HF_"))} | {
            "HF_ENDPOINT": "http://127.0.0.1:9",
            "ENVHUB_DATABASE_URL": f"sqlite:///{folder / 'envhub.db'}",
            "ENVHUB_DATA_DIR": str(folder / "data"),
            "ENVHUB_TEMPLATES_DIR": str(folder / "templates"),
            "ENVHUB_SYNC_INTERVAL_S": "0",
            "ENVHUB_HEALTH_INTERVAL_S": "0",
            "ENVHUB_QUALITY_INTERVAL_S": "0",
            "ENVHUB_UI": "false",
            "ENVHUB_MAX_ENDPOINTS": str(endpoints),
            "ENVHUB_MAX_ENDPOINTS_PER_OWNER": str(endpoints),
            "ENVHUB_DOCKER_BASE_IMAGE": BASE_IMAGE,
            "ENVHUB_LAUNCH_TIMEOUT_S": "600",  # 16 containers starting at once on 2 cores take minutes
        }
        port = free_port()
        api = f"http://127.0.0.1:{port}"
        launched: list[str] = []
        try:
            before, stop_s = _launched(api, _serve(env, port), backend, endpoints, launched)
            again = _restarted(env, port, api, launched)
        finally:
            if backend != "process":  # containers outlive envhub: the bench's must not
                _remove_containers(launched)
    after = again.pop("ready")
    return {
        "backend": backend,
        "endpoints": endpoints,
        "stop s": stop_s,
        **again,
        "adopted": sum(len(set(before[e]) & set(after[e])) for e in launched),
        "started again": sum(len(set(after[e]) - set(before[e])) for e in launched),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoints", type=int, default=16)
    parser.add_argument("--backend", action="append", choices=["process", "docker", "swarm"])
    args = parser.parse_args()
    print(machine_line())
    print(f"load average at start: {load_average()}")
    for backend in args.backend or ["process", "docker"]:
        row = run(args.endpoints, backend)
        print(table(list(row), [list(row.values())]))
    print(f"load average at end: {load_average()}")


if __name__ == "__main__":
    main()
