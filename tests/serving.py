"""Running an OpenEnv environment folder as a real server for a test."""

import asyncio
import socket
import tempfile
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
from sqlalchemy import event

from app.main import create_app
from app.server import envhub_server
from app.services import Services
from app.settings import REPO_ROOT, Settings
from core.outbound import OutboundGuard
from gateway.timers import LOOP_TIMERS, Timers
from tests.conftest import wait_until

T = TypeVar("T")

TEMPLATES = REPO_ROOT / "spaces_templates"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serve_templates(*names: str, timeout_s: float = 120, extra: Path | None = None) -> Iterator[dict[str, str]]:
    """Launch built-in templates (and the environment folders in `extra`) with the process backend; yields each
    one's gateway URL.

    This is the path a trainer takes: envhub's launcher starts the server and its
    gateway carries every request and frame.
    """
    with tempfile.TemporaryDirectory(prefix="envhub-test-") as scratch:
        settings = Settings(
            database_url=f"sqlite:///{scratch}/envhub.db",
            data_dir=Path(scratch) / "data",
            templates_dir=TEMPLATES,
            extra_templates=str(extra or ""),
            hf_endpoint="http://127.0.0.1:9",
            sync_interval_s=0,
            launch_timeout_s=timeout_s,
            max_endpoints_per_owner=len(names),
        )
        envhub = Envhub(settings)
        try:
            launched = [envhub.launch(f"template:{name}") for name in names]
            urls = {}
            for name, endpoint in zip(names, launched, strict=True):
                current = envhub.wait_status(endpoint["id"], "running", "failed", timeout_s=timeout_s + 10)
                if current["status"] != "running":
                    raise RuntimeError(f"{name} did not start: {current['message']}")
                urls[name] = current["url"]
            yield urls
        finally:
            envhub.stop()


class Envhub:
    """envhub served by uvicorn on loopback, as trainers reach it: its API and gateway, and with `ui` its web page
    (the tests that open it; building the page takes seconds the others need not spend). `guard` replaces the
    outbound guard the settings make, e.g. one that takes a test's server on loopback for a public address; `timers`
    the clock its gateway times WebSocket pings by."""

    def __init__(
        self, settings: Settings, *, ui: bool = False, guard: OutboundGuard | None = None, timers: Timers = LOOP_TIMERS
    ) -> None:
        settings = settings.model_copy(update={"ui": ui})
        self.settings = settings
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        app = create_app(settings, guard=guard, timers=timers)
        self.services: Services = app.state.services
        # A test stops it with its page still open: the page's event stream is cut after a second, not ten.
        self.server = envhub_server(
            app, host="127.0.0.1", port=self.port, log_level="warning", timeout_graceful_shutdown=1
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_until(lambda: self.server.started, timeout_s=30)
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def end_endpoints(self) -> None:
        """Stop every endpoint it runs: containers and swarm services outlive envhub (the next start reconciles them),
        and a test's must not run on, taking the machine from the tests after it."""
        for endpoint in self.http.get("/api/endpoints").json()["data"]:
            if endpoint["status"] in ("starting", "running"):
                self.http.delete(f"/api/endpoints/{endpoint['id']}")

    def on_loop(self, work: Coroutine[Any, Any, T], timeout_s: float = 30) -> T:
        """What a coroutine returns, run on envhub's event loop (where its gateway and door live)."""
        loop = self.server.servers[0].get_loop()
        return asyncio.run_coroutine_threadsafe(work, loop).result(timeout_s)

    def stop(self) -> None:
        self.http.close()
        self.server.should_exit = True
        self.thread.join(timeout=30)

    @contextmanager
    def sql_on_the_loop(self) -> Iterator[list[tuple[str, Any]]]:
        """The SQL that runs on envhub's event loop thread while the block runs: each statement's first line, and
        its parameters."""
        ran: list[tuple[str, Any]] = []

        def noted(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
            if threading.get_ident() == self.thread.ident:
                ran.append((statement.split("\n")[0][:200], parameters))

        event.listen(self.services.engine, "before_cursor_execute", noted)
        try:
            yield ran
        finally:
            event.remove(self.services.engine, "before_cursor_execute", noted)

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

    def ready_replicas(self, endpoint_id: str) -> list[dict[str, Any]]:
        """The replicas of an endpoint's pool that take sessions."""
        return [r for r in self.endpoint(endpoint_id)["pool"]["replicas"] if r["status"] == "ready"]

    def running(self, environment: str, **body: Any) -> dict[str, Any]:
        endpoint = self.launch(environment, **body)
        current = self.wait_status(endpoint["id"], "running", "failed")
        assert current["status"] == "running", current["message"]
        return current
