"""envhub as its own process, as deployed, so that a benchmark's client never shares its CPU time."""

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from hosting.runtimes.processes import free_port


@contextmanager
def envhub_process(scratch: Path, templates: Path, checkout: Path | None = None) -> Iterator[str]:
    """`python -m app serve` on a free port with its catalog in `scratch` (from another checkout of envhub when
    given, an earlier commit say); yields its base URL."""
    with envhub_server(scratch, templates, checkout=checkout) as (url, _server):
        yield url


@contextmanager
def envhub_server(
    scratch: Path,
    templates: Path,
    database_url: str | None = None,
    settings: dict[str, str] | None = None,
    checkout: Path | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`python -m app serve` on a free port, on its own catalog in `scratch` or on `database_url` (one instance of
    several), with `settings` as more environment variables."""
    port = free_port()
    env = (
        os.environ
        | {
            "ENVHUB_DATABASE_URL": database_url or f"sqlite:///{scratch}/envhub.db",
            "ENVHUB_DATA_DIR": f"{scratch}/data",
            "ENVHUB_TEMPLATES_DIR": str(templates),
            "ENVHUB_SYNC_INTERVAL_S": "0",
            "ENVHUB_HEALTH_INTERVAL_S": "0",
            "ENVHUB_QUALITY_INTERVAL_S": "0",
            "HF_ENDPOINT": "http://127.0.0.1:9",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "GRADIO_ANALYTICS_ENABLED": "False",
        }
        | (settings or {})
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port)],
        cwd=checkout,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/api/health").is_success:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url, server
    finally:
        server.terminate()
        server.wait(timeout=30)
