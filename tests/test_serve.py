"""`python -m app serve` as a user starts it: up at once, even with the Hub out of reach."""

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.settings import REPO_ROOT
from tests.conftest import wait_until
from tests.serving import free_port
from tests.test_cli import cli_env
from tests.test_templates import make_template


class Server:
    def __init__(self, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--port", str(self.port)],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/api/health", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self._reader.join(timeout=5)
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture
def offline_server(tmp_path: Path) -> Iterator[Server]:
    templates = tmp_path / "templates"
    make_template(templates, "maze", "title: Maze\ntags: [openenv]")
    env = cli_env(tmp_path, "http://127.0.0.1:9") | {"ENVHUB_TEMPLATES_DIR": str(templates)}
    server = Server(env)
    yield server
    server.stop()


def test_offline_start_serves_templates_and_says_so_once(offline_server: Server) -> None:
    wait_until(offline_server.healthy, timeout_s=30)

    found = httpx.get(f"{offline_server.url}/api/environments").json()
    assert [e["id"] for e in found["data"]] == ["template:maze"]

    wait_until(lambda: any("Hub sync failed" in line for line in offline_server.lines), timeout_s=30)
    hub_lines = [line for line in offline_server.lines if "127.0.0.1:9" in line]
    assert len(hub_lines) == 1, hub_lines
    assert "serving the 1 environment in the catalog" in hub_lines[0]
    assert not any("Traceback" in line for line in offline_server.lines)
