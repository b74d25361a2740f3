"""An endpoint's replicas' servers: starting and stopping each server of its pool, and what runs of them.

Each replica logs to `<replica id>.log`. A service runtime (the swarm's) runs one service for the
whole pool: its tasks are the replicas, read from the orchestrator (read_tasks). Their rows, and what
they say of each replica, are the lifecycle's to write (hosting.lifecycle).
"""

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from core.errors import EnvhubError, LaunchError
from hosting.models import Backend, Endpoint, Replica
from hosting.replica_store import ReplicaStore
from hosting.runtimes.base import (
    AnyRuntime,
    Handle,
    Launched,
    LaunchSpec,
    Report,
    Task,
    handle_of,
    is_service,
)
from hosting.runtimes.logs import LIVENESS_QUERY, death_note
from hosting.runtimes.process import ProcessHandle
from hosting.runtimes.processes import resident_bytes

__all__ = ["Replicas"]

log = logging.getLogger(__name__)


class Replicas:
    """The servers behind every endpoint's replicas."""

    def __init__(self, store: ReplicaStore, runtimes: dict[Backend, AnyRuntime], logs_dir: Path) -> None:
        self.store = store  # read only: which other replicas a shared server still serves
        self.runtimes = runtimes
        self.logs_dir = logs_dir
        # Replicas this process is starting: a stop meanwhile only marks the row, and the start stops the server
        # once it has started (one that has not yet served may not take SIGTERM: a sandbox's pid 1 ignores it).
        self._starting: set[str] = set()

    def log_path(self, replica: str) -> Path:
        return self.logs_dir / f"{replica}.log"

    def handle(self, endpoint: Endpoint, replica: Replica) -> Handle | None:
        runtime = self.runtimes.get(endpoint.backend)
        return handle_of(runtime, replica.handle) if runtime is not None else None

    def resident_bytes(self, endpoint: Endpoint) -> int | None:
        """The memory the endpoint's ready servers hold together, where envhub can see it: process servers only."""
        total = None
        for row in self.store.rows(endpoint.id, ready_only=True):
            handle = self.handle(endpoint, row)
            held = resident_bytes(handle.pid) if isinstance(handle, ProcessHandle) else None
            if held is None:
                return None
            total = (total or 0) + held
        return total

    # -- one server per replica (process, docker)

    def start(self, endpoint: Endpoint, row: Replica, spec: LaunchSpec[Any], report: Report) -> Launched[Any]:
        """Start an added replica's server and wait until it serves; LaunchError when it cannot. `spec.on_started`
        hears its handle as soon as there is one (a restart after a crash can stop it)."""
        runtime = self.runtimes[endpoint.backend]
        spec = replace(spec, server_id=row.id, log_path=self.log_path(row.id))
        self._starting.add(row.id)
        try:
            return runtime.start(spec, report)
        except LaunchError:
            raise
        except Exception as exc:
            log.exception("starting replica %s failed", row.id)
            raise LaunchError(f"launch failed unexpectedly: {type(exc).__name__}: {exc}") from exc
        finally:
            self._starting.discard(row.id)

    def stop(self, endpoint: Endpoint, replica: Replica) -> None:
        """Stop a replica's server, when there is one left (one still starting is stopped once it has started)."""
        if replica.id in self._starting:
            return
        handle = self.handle(endpoint, replica)
        if handle is not None and not endpoint.handle:  # a service's tasks are stopped by scaling the service
            try:
                self.stop_server(endpoint, replica.id, handle)
            except EnvhubError as exc:
                log.warning("could not stop replica %s: %s", replica.id, exc.message)

    def stop_server(self, endpoint: Endpoint, replica_id: str, handle: Handle) -> None:
        """Stop a replica's server, unless another live replica is served by it too (one Space, two endpoints): the
        last of them stops it. The rows say which are live, so this holds across restarts and instances."""
        runtime = self.runtimes[endpoint.backend]
        shared = handle.shared()
        if shared is not None:
            for row in self.store.live_on(endpoint.backend, besides=replica_id):
                other = handle_of(runtime, row.handle)
                if other is not None and other.shared() == shared:
                    log.info("replica %s stopped; %s serves replica %s too, and runs on", replica_id, shared, row.id)
                    return
        runtime.stop(handle)

    def is_running(self, endpoint: Endpoint, replica: Replica) -> bool:
        handle = self.handle(endpoint, replica)
        return handle is not None and self.runtimes[endpoint.backend].is_running(handle)

    def death_note(self, replica: Replica) -> str:
        return death_note(self.log_path(replica.id))

    # -- a service's tasks (swarm)

    def read_tasks(self, endpoint: Endpoint) -> tuple[list[Task], set[str]] | None:
        """The service's tasks as the orchestrator reports them, and those that serve (a running task serves once
        its server answers /health); None when the endpoint is no service."""
        runtime = self.runtimes[endpoint.backend]
        service = handle_of(runtime, endpoint.handle)
        if service is None or not is_service(runtime):
            return None
        tasks = runtime.tasks(service)
        serving = {r.id for r in self.store.rows(endpoint.id, ready_only=True)}
        headers = runtime.auth_headers(service)
        # Running is not serving: a task takes sessions once its server answers /health.
        return tasks, {t.id for t in tasks if t.running and (t.id in serving or self._answers(t, headers))}

    @staticmethod
    def _answers(task: Task, headers: dict[str, str]) -> bool:
        try:
            return httpx.get(f"{task.url}/health?{LIVENESS_QUERY}", headers=headers, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False
