"""Running an OpenEnv environment folder as a real server for a test."""

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from app.main import create_app
from app.settings import REPO_ROOT, Settings
from tests.conftest import wait_until

TEMPLATES = REPO_ROOT / "spaces_templates"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serve_template(folder: Path | str, *, env: dict[str, str] | None = None, timeout_s: float = 30) -> Iterator[str]:
    """Serve a template folder (a name under spaces_templates/ or a path) with uvicorn; yields its base URL."""
    path = TEMPLATES / folder if isinstance(folder, str) else folder
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1", "--port", str(port)],
        cwd=path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{path.name} exited with {process.returncode}: {process.stderr.read()[-2000:]}")  # type: ignore[union-attr]
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path.name} did not answer /health within {timeout_s} s")
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


class Envhub:
    """envhub served by uvicorn on loopback, as trainers reach it."""

    def __init__(self, settings: Settings) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_until(lambda: self.server.started, timeout_s=30)
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def stop(self) -> None:
        self.http.close()
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def launch(self, environment: str, **body: Any) -> dict[str, Any]:
        response = self.http.post("/api/endpoints", json={"environment": environment, **body})
        assert response.status_code == 201, response.text
        endpoint: dict[str, Any] = response.json()
        return endpoint

    def endpoint(self, endpoint_id: str) -> dict[str, Any]:
        body: dict[str, Any] = self.http.get(f"/api/endpoints/{endpoint_id}").json()
        return body

    def wait_status(self, endpoint_id: str, *statuses: str, timeout_s: float = 60) -> dict[str, Any]:
        wait_until(lambda: self.endpoint(endpoint_id)["status"] in statuses, timeout_s=timeout_s)
        return self.endpoint(endpoint_id)

    def running(self, environment: str, **body: Any) -> dict[str, Any]:
        endpoint = self.launch(environment, **body)
        current = self.wait_status(endpoint["id"], "running", "failed")
        assert current["status"] == "running", current["message"]
        return current
