"""`python -m app serve` as a user starts it: up at once, even with the Hub out of reach, and right behind a proxy."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect

from app.settings import REPO_ROOT
from tests.conftest import wait_until
from tests.environments import write_count_env
from tests.serving import free_port
from tests.test_cli import cli_env
from tests.test_templates import make_template


class Server:
    def __init__(self, env: dict[str, str], port: int | None = None, *, make: bool = False) -> None:
        """`python -m app serve --port`, or with `make` as a README reader starts it: `make run PORT=`."""
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.lines: list[str] = []
        command = [sys.executable, "-m", "app", "serve", "--port", str(self.port)]
        self.process = subprocess.Popen(
            ["make", "--no-print-directory", "run", f"PORT={self.port}"] if make else command,
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # a process group of its own, as a terminal's foreground job
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

    def interrupt(self) -> int:
        """Ctrl-C in its terminal: SIGINT to its whole process group, and wait for it to exit. Its exit status."""
        os.killpg(self.process.pid, signal.SIGINT)
        self.process.wait(timeout=60)
        return self.stop()

    def stop(self) -> int:
        """Stop it as a service manager would: SIGTERM, and SIGKILL if it has not exited in 30 s. Its exit status."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(timeout=10)
            self._reader.join(timeout=5)
            assert self.process.stdout is not None
            self.process.stdout.close()
        return self.process.returncode


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
    assert offline_server.stop() == 0  # SIGTERM, as a service manager stops it: a normal end
    assert not any("Traceback" in line for line in offline_server.lines)


@pytest.mark.parametrize(("make", "status"), [(False, 1), (True, 2)], ids=["serve", "make-run"])
def test_a_busy_port_is_refused_before_anything_starts(tmp_path: Path, make: bool, status: int) -> None:
    """`make run PORT=` serves on that port (else it would serve on 7860): refused at once, make fails too."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        server = Server(cli_env(tmp_path, "http://127.0.0.1:9"), port=taken.getsockname()[1], make=make)
        assert server.process.wait(timeout=60) == status
    server.stop()
    assert not any("serving on" in line for line in server.lines), server.lines


def count_templates(tmp_path: Path) -> dict[str, str]:
    write_count_env(tmp_path / "templates" / "count")
    return cli_env(tmp_path, "http://127.0.0.1:9") | {
        "ENVHUB_TEMPLATES_DIR": str(tmp_path / "templates"),
        "ENVHUB_DATA_DIR": str(tmp_path / "data"),
        "ENVHUB_SYNC_INTERVAL_S": "0",
    }


@pytest.mark.timeout(300)
def test_ctrl_c_stops_the_endpoints_says_so_in_one_line_and_exits_0(tmp_path: Path) -> None:
    server = Server(count_templates(tmp_path))
    try:
        wait_until(server.healthy, timeout_s=90)
        ids = [
            httpx.post(f"{server.url}/api/endpoints", json={"environment": "template:count"}).json()["id"] for _ in "ab"
        ]

        def running() -> bool:
            return all(httpx.get(f"{server.url}/api/endpoints/{i}").json()["status"] == "running" for i in ids)

        wait_until(running, timeout_s=90)
        replicas = [httpx.get(f"{server.url}/api/endpoints/{i}").json()["internal_url"] for i in ids]
        assert server.interrupt() == 0
    finally:
        server.stop()
    assert not any("Traceback" in line for line in server.lines), server.lines
    stopping = [line for line in server.lines if all(i in line for i in ids)]
    assert len(stopping) == 1, server.lines
    for url in replicas:  # their servers are gone with envhub
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{url}/health", timeout=2)


def test_off_a_space_a_client_is_counted_by_its_own_address_whatever_it_forwards(offline_server: Server) -> None:
    """Per-client limits (dataset downloads, sessions held) count a client by its address: one that could name
    another address in X-Forwarded-For would take a fresh share with every request."""
    wait_until(offline_server.healthy, timeout_s=30)
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=10) as client:
        answer = client.get(f"{offline_server.url}/api/environments", headers={"X-Forwarded-For": "203.0.113.9"})
    assert answer.status_code == 200
    # The access log names the address a request counted against.
    wait_until(lambda: any('"GET /api/environments' in line for line in offline_server.lines), timeout_s=10)
    [logged] = [line for line in offline_server.lines if '"GET /api/environments' in line]
    assert "127.0.0.2:" in logged and "203.0.113.9" not in logged, logged


# What the Spaces proxy adds to a request for https://alice-envhub.hf.space (TLS ends at the proxy).
SPACE_PROXY = {
    "X-Forwarded-Proto": "https",
    "X-Forwarded-Host": "alice-envhub.hf.space",
    "X-Forwarded-For": "203.0.113.9",
}


@pytest.mark.timeout(300)
def test_behind_the_spaces_proxy_urls_are_https_on_the_forwarded_host(tmp_path: Path) -> None:
    server = Server(count_templates(tmp_path))
    try:
        wait_until(server.healthy, timeout_s=90)
        launched = httpx.post(
            f"{server.url}/api/endpoints", json={"environment": "template:count"}, headers=SPACE_PROXY
        )
        assert launched.status_code == 201, launched.text
        endpoint_id = launched.json()["id"]
        assert launched.json()["url"] == f"https://alice-envhub.hf.space/endpoints/{endpoint_id}"
        direct = httpx.get(f"{server.url}/api/endpoints/{endpoint_id}").json()
        assert direct["url"] == f"{server.url}/endpoints/{endpoint_id}"  # no proxy, no rewriting
        ui_config = httpx.get(f"{server.url}/config", headers=SPACE_PROXY).json()
        assert ui_config["root"].startswith("https://alice-envhub.hf.space")

        def running() -> bool:
            return bool(httpx.get(f"{server.url}/api/endpoints/{endpoint_id}").json()["status"] == "running")

        wait_until(running, timeout_s=60)
        # The proxy turns wss:// into ws:// plus the same headers; the gateway carries the session through.
        ws_url = f"ws://127.0.0.1:{server.port}/endpoints/{endpoint_id}/ws"
        with connect(ws_url, additional_headers=SPACE_PROXY | {"X-Forwarded-Proto": "wss"}) as ws:
            ws.send(json.dumps({"type": "reset", "data": {"episode_id": "via-proxy"}}))
            assert json.loads(ws.recv())["type"] == "observation"
            ws.send(json.dumps({"type": "state"}))
            assert json.loads(ws.recv())["data"]["episode_id"] == "via-proxy"
        httpx.delete(f"{server.url}/api/endpoints/{endpoint_id}")
    finally:
        server.stop()
    assert not any("Traceback" in line for line in server.lines), server.lines
