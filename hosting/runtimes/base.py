"""Launch backends: each starts an environment somewhere and hands back the URL it answers on.

A runtime takes the options of its backend (hosting.options), checked against the
environment, and returns a handle of its own type: what it needs to find, watch and stop
the server later, kept as JSON on the row of the replica it serves. Most runtimes start
one server per replica, and envhub keeps the pool; a service runtime (the swarm's) starts
one service that holds every replica, and says which tasks it runs.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, Protocol, TypeGuard, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict

from catalog.models import EnvironmentDetail
from core.errors import LaunchError
from hosting.models import Backend
from hosting.options import BackendOptions
from hosting.runtimes.logs import tail_note

__all__ = [
    "AnyRuntime",
    "Handle",
    "LaunchSpec",
    "Launched",
    "Report",
    "Runtime",
    "ServiceRuntime",
    "Task",
    "handle_of",
    "is_service",
    "serve_when_healthy",
    "wait_healthy",
]

Report = Callable[[str], None]


class Handle(BaseModel):
    """What a runtime needs to find, watch and stop a server, as the replica's row keeps it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    server: str  # the id the backend knows the server by: the replica's (a service's: its endpoint's)
    # The path the gateway serves the server under (/endpoints/<id>) when the backend set it as the server's
    # ASGI root_path: the gateway then passes the client's host and scheme on, for pages that build URLs.
    root_path: str = ""

    def shared(self) -> str | None:
        """What names the server when other replicas may be served by it too; None: it is this replica's alone."""
        return None


Options = TypeVar("Options", bound=BackendOptions)
H = TypeVar("H", bound=Handle)


@dataclass(frozen=True)
class LaunchSpec(Generic[Options]):
    server_id: str  # what the backend names and labels the server by: the replica's id (a service's: its endpoint's)
    environment: EnvironmentDetail
    log_path: Path
    options: Options  # the backend's own, checked against the environment (check() filled in what it defaults)
    env: dict[str, str] = field(default_factory=dict, repr=False)  # variables and secrets for the server
    token: str | None = field(default=None, repr=False)  # the launching user's Hub token; never in a handle in clear
    # The path the gateway serves the server under (/endpoints/<id>): its ASGI root_path, where the backend can
    # set it, so that pages building absolute URLs (openenv's gradio UI at /web) point back through the gateway.
    root_path: str = ""
    replicas: int = 1  # the tasks a service runtime starts; other runtimes start one server per spec
    # Told the server's handle as soon as it exists, before it serves: a crash meanwhile leaves a row that names it.
    on_started: Callable[[Any], None] = field(default=lambda handle: None, repr=False, compare=False)


@dataclass(frozen=True)
class Launched(Generic[H]):
    url: str  # where envhub reaches the server; the gateway proxies to it
    handle: H
    note: str = ""  # how it runs otherwise than the environment's files say (built with envhub's Dockerfile, ...)


class Runtime(Protocol[Options, H]):
    name: Backend
    handle_type: type[H]

    def check(self, environment: EnvironmentDetail, options: Options, token: str | None = None) -> Options:
        """The options completed for this environment; InvalidInputError with the reason when it cannot run here.

        token is the launching user's Hub token, for a backend that acts on the Hub as them.
        """
        ...

    def start(self, spec: LaunchSpec[Options], report: Report) -> Launched[H]:
        """Start and wait until /health answers; raises LaunchError (with the log tail) otherwise."""
        ...

    def stop(self, handle: H) -> None: ...

    def is_running(self, handle: H) -> bool: ...

    def auth_headers(self, handle: H) -> dict[str, str]:
        """Headers the gateway adds to reach the server (a private Space needs a token)."""
        ...

    def managed_servers(self) -> set[str]:
        """Ids of the servers this backend holds now, whatever the database says."""
        ...

    def stop_leftover(self, server_id: str) -> None:
        """Stop a server this backend holds that no row claims (found by managed_servers)."""
        ...

    def sweep(self, live_instances: set[str]) -> None:
        """Remove what instances no longer alive started ahead of launches (servers no endpoint holds)."""
        ...

    def close(self) -> None:
        """Release what the backend holds in envhub's process; servers are left as they are."""
        ...


AnyRuntime = Runtime[Any, Any]


@dataclass(frozen=True)
class Task:
    """One replica of a service, as its runtime sees it."""

    id: str
    state: str  # the orchestrator's word: new, pending, starting, running, failed, shutdown ...
    url: str | None  # where envhub reaches it, once it publishes its port
    host: str  # the node it runs on, with the node's labels
    error: str = ""
    started_at: datetime | None = None

    @property
    def running(self) -> bool:
        return self.state == "running" and self.url is not None


class ServiceRuntime(Runtime[Options, H], Protocol):
    """A runtime whose one service holds every replica of an endpoint; the orchestrator replaces dead ones."""

    def tasks(self, handle: H) -> list[Task]:
        """The service's current tasks (not those it has shut down)."""
        ...

    def scale(self, handle: H, replicas: int) -> None:
        """Ask for this many tasks."""
        ...


def is_service(runtime: AnyRuntime) -> TypeGuard[ServiceRuntime[Any, Any]]:
    """Whether the runtime holds all of an endpoint's replicas in one service."""
    return hasattr(runtime, "tasks") and hasattr(runtime, "scale")


def handle_of(runtime: AnyRuntime, stored: dict[str, Any]) -> Handle | None:
    """The runtime's handle from a row's JSON; None for a row that has none (it never started)."""
    return runtime.handle_type.model_validate(stored) if stored else None


def wait_healthy(
    url: str,
    *,
    timeout_s: float,
    alive: Callable[[], bool],
    what: str,
    log_path: Path | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    """Poll GET {url}/health until it answers 200, the server dies, or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2, headers=headers) as client:
        while True:
            if not alive():
                raise LaunchError(
                    f"{what} exited before it answered /health" + tail_note(log_path),
                    code="server_exited_before_health",
                )
            try:
                if client.get(f"{url}/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                late = f"{what} did not answer GET /health within {timeout_s:g} s"
                raise LaunchError(late + tail_note(log_path), code="health_timeout")
            time.sleep(0.1)


def serve_when_healthy(
    runtime: Runtime[Options, H],
    launched: Launched[H],
    *,
    timeout_s: float,
    what: str,
    log_path: Path,
    started: Callable[[H], None] = lambda handle: None,
) -> Launched[H]:
    """The launched server once it answers /health (`started` is told its handle first); stopped (and the
    LaunchError raised) when it never does."""
    try:
        started(launched.handle)
        wait_healthy(
            launched.url,
            timeout_s=timeout_s,
            alive=lambda: runtime.is_running(launched.handle),
            what=what,
            log_path=log_path,
        )
    except LaunchError:
        runtime.stop(launched.handle)
        raise
    return launched
