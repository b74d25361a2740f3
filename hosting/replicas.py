"""An endpoint's replicas' servers: starting and stopping each server of its pool, and what runs of them.

Each replica logs to `<replica id>.log`. A service runtime (the swarm's) runs one service for the
whole pool: its tasks are the replicas, read from the orchestrator (sync_tasks). Their rows are the
store's (hosting/replica_store.py).
"""

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from core.clock import utcnow
from core.errors import EnvhubError, LaunchError
from gateway.pools import Pool
from hosting.models import Backend, Endpoint, Replica, ReplicaStatus
from hosting.replica_store import ReplicaStore
from hosting.routing import Routes
from hosting.runtimes import AnyRuntime, Handle, LaunchSpec, ProcessHandle, Report, Task, handle_of, is_service
from hosting.runtimes.logs import LIVENESS_QUERY, death_note
from hosting.runtimes.processes import resident_bytes

__all__ = ["Replicas"]

log = logging.getLogger(__name__)


class Replicas:
    """The servers behind every endpoint's replicas."""

    def __init__(
        self, store: ReplicaStore, runtimes: dict[Backend, AnyRuntime], routes: Routes, logs_dir: Path
    ) -> None:
        self.store = store
        self.runtimes = runtimes
        self.routes = routes
        routes.on_capacity = store.note_capacity
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

    def start(self, endpoint: Endpoint, row: Replica, spec: LaunchSpec[Any], report: Report) -> tuple[Replica, str]:
        """Start an added replica's server and wait until it serves: its row, and how it runs otherwise than the
        environment's files say (Launched.note); LaunchError (its row says why) when it cannot."""
        runtime = self.runtimes[endpoint.backend]

        def started(handle: Any) -> None:  # named on its row at once: a restart after a crash can stop it
            self.store.update(row.id, handle=handle.model_dump())

        spec = replace(spec, server_id=row.id, log_path=self.log_path(row.id), on_started=started)
        self._starting.add(row.id)
        try:
            launched = runtime.start(spec, report)
        except LaunchError as exc:
            self.store.update(row.id, status=ReplicaStatus.FAILED, last_error=exc.message, stopped_at=utcnow())
            raise
        except Exception as exc:
            log.exception("starting replica %s failed", row.id)
            message = f"launch failed unexpectedly: {type(exc).__name__}: {exc}"
            self.store.update(row.id, status=ReplicaStatus.FAILED, last_error=message, stopped_at=utcnow())
            raise LaunchError(message) from exc
        finally:
            self._starting.discard(row.id)
        ready = self.store.update(
            row.id,
            status=ReplicaStatus.READY,
            internal_url=launched.url,
            handle=launched.handle.model_dump(),
            started_at=utcnow(),
        )
        if ready is None or ready.status != ReplicaStatus.READY:  # stopped while it started
            self._stop_server(endpoint, row.id, launched.handle)
            raise LaunchError(f"replica {row.id} was stopped while it started")
        self.routes.refresh(endpoint.id)
        return ready, launched.note

    def stop(self, endpoint: Endpoint, replica: Replica, *, status: ReplicaStatus, error: str = "") -> None:
        """Stop a replica's server (when there is one left) and record how it ended."""
        self.store.update(replica.id, status=status, last_error=error or replica.last_error, stopped_at=utcnow())
        self.routes.refresh(endpoint.id)
        if replica.id in self._starting:
            return
        handle = self.handle(endpoint, replica)
        if handle is not None and not endpoint.handle:  # a service's tasks are stopped by scaling the service
            try:
                self._stop_server(endpoint, replica.id, handle)
            except EnvhubError as exc:
                log.warning("could not stop replica %s: %s", replica.id, exc.message)

    def _stop_server(self, endpoint: Endpoint, replica_id: str, handle: Handle) -> None:
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

    def sync_tasks(self, endpoint: Endpoint, pool: Pool | None) -> tuple[list[Task], list[Replica]]:
        """The service's tasks as the orchestrator reports them, taken into the rows (a running task is ready once
        its server answers /health). The tasks, and the replicas that ended (they lost their sessions)."""
        runtime = self.runtimes[endpoint.backend]
        service = handle_of(runtime, endpoint.handle)
        if service is None or not is_service(runtime):
            return [], []
        tasks = runtime.tasks(service)
        serving = {r.id for r in self.store.rows(endpoint.id, ready_only=True)}
        headers = runtime.auth_headers(service)
        # Running is not serving: a task takes sessions once its server answers /health.
        ready = {t.id for t in tasks if t.running and (t.id in serving or self._answers(t, headers))}
        ended = self.store.take_tasks(endpoint, tasks, ready)
        self.routes.refresh(endpoint.id)
        return tasks, ended

    @staticmethod
    def _answers(task: Task, headers: dict[str, str]) -> bool:
        try:
            return httpx.get(f"{task.url}/health?{LIVENESS_QUERY}", headers=headers, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False
