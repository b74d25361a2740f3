"""The swarm backend: an endpoint's replicas as the tasks of one Docker Swarm service, placed on the swarm's nodes.

Each endpoint is one replicated service, `envhub-<endpoint id>`, labelled like the docker
backend's containers; the swarm places its tasks by the launch's constraints and replaces
a task that dies. Every task publishes the server's port on its own node in host mode, on
a port the node picks, and envhub reaches each task there itself: it routes sessions to
replicas (sticky, by free slots), which the swarm's ingress mesh would spread at random.
So the nodes' addresses must be reachable from envhub.

An image built from an environment's folder exists only in the engine that built it (the
manager): on a swarm of more than one node, push it to a registry every node pulls from,
or load it on each node, or tasks placed elsewhere are rejected ("No such image").
"""

import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import docker
import requests
from docker.errors import APIError, DockerException, NotFound
from docker.models.services import Service
from docker.types import EndpointSpec, Resources, RestartPolicy, ServiceMode
from docker.utils import parse_bytes

from catalog.models import EnvironmentDetail
from core.errors import BackendUnavailableError, LaunchError
from hosting.models import Backend
from hosting.options import SwarmOptions
from hosting.runtimes.base import Handle, Launched, LaunchSpec, Report, Task, wait_healthy
from hosting.runtimes.engine import CATALOG_LABEL, LABEL, engine_client
from hosting.runtimes.images import Image, check_space_build, environment_image, image_options
from hosting.runtimes.logs import tail_note
from hosting.runtimes.snapshots import Snapshots

__all__ = ["NOT_A_MANAGER", "SwarmRuntime"]

NOT_A_MANAGER = "not_a_swarm_manager"  # the code when the engine is not a swarm manager
ENVIRONMENT_LABEL = "envhub.environment"

log = logging.getLogger(__name__)

_SECOND_NS = 1_000_000_000
_RESTART_DELAY_NS = _SECOND_NS  # between a task's death and its replacement's start
_STOP_GRACE_NS = 5 * _SECOND_NS  # as the docker backend's stop
_NODE_TTL_S = 30  # how long a node's address and labels are taken as known
_GIVE_UP_AFTER = 3  # tasks ended, none running: a launch whose server cannot start
_ENDED = {"complete", "failed", "rejected"}  # a server that exits, even cleanly, serves nobody
# Desired states of tasks the swarm has let go of; a replacement waiting out the restart delay is "ready".
_LET_GO = {"complete", "shutdown", "failed", "rejected", "remove", "orphaned"}


@dataclass(frozen=True)
class _Node:
    addr: str  # where its published ports are reached
    host: str  # its hostname, with its labels


class ServiceHandle(Handle):
    service: str  # the Swarm service's id
    image: str
    port: int  # the port the image serves on, inside each task


class _Logs:
    """Services' logs copied into their log files: one stream each, ended when the service is stopped.

    The engine keeps a followed service log open after the service is removed, and the SDK gives
    neither a timeout nor a way to close it (closing the response from another thread blocks on
    the reader's lock), so the stream's socket is shut down, as the SDK reaches it for attach.
    """

    def __init__(self) -> None:
        self._open: dict[str, Any] = {}  # service id: the socket of its log stream
        self._lock = threading.Lock()

    def follow(self, client: docker.DockerClient, service_id: str, log_path: Path) -> None:
        api = client.api
        try:
            params = {"follow": True, "stdout": True, "stderr": True}
            response = api._get(api._url("/services/{0}/logs", service_id), params=params, stream=True)
            stream = api._get_raw_response_socket(response)
            chunks: Iterator[bytes] = api._multiplexed_response_stream_helper(response)
        except (DockerException, requests.RequestException) as exc:
            log.info("not following the log of service %s: %s", service_id, exc)
            return
        with self._lock:
            self._open[service_id] = stream

        def copy() -> None:
            try:
                log_path.parent.mkdir(parents=True, exist_ok=True)
                with log_path.open("ab") as file:
                    for chunk in chunks:
                        file.write(chunk)
                        file.flush()
            except Exception as exc:  # shut down, or the engine went away (urllib3 says so in its own words)
                log.debug("the log of service %s ends: %s", service_id, exc)
            finally:
                with self._lock:
                    self._open.pop(service_id, None)
                response.close()

        threading.Thread(target=copy, name=f"logs-{service_id[:12]}", daemon=True).start()

    def end(self, service_id: str) -> None:
        with self._lock:
            stream = self._open.pop(service_id, None)
        if stream is not None:
            with suppress(OSError, AttributeError):
                getattr(stream, "_sock", stream).shutdown(socket.SHUT_RDWR)

    def end_all(self) -> None:
        with self._lock:
            services = list(self._open)
        for service_id in services:
            self.end(service_id)


def _timestamp(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def _reason(tasks: list[dict[str, Any]]) -> str:
    """What the latest task says of itself: its state, and its error when it has one."""
    if not tasks:
        return "the swarm has not created a task yet"
    latest = max(tasks, key=lambda t: str((t.get("Status") or {}).get("Timestamp", "")))
    status = latest.get("Status") or {}
    state, error = status.get("State", "unknown"), status.get("Err") or status.get("Message") or ""
    return f"its latest task is {state}" + (f": {error}" if error else "")


class SwarmRuntime:
    name = Backend.SWARM
    handle_type = ServiceHandle

    def __init__(
        self,
        host: str | None = None,
        *,
        base_image: str = "python:3.11-slim",
        memory: str = "2g",
        cpus: float = 1.0,
        pids: int = 512,
        ready_timeout_s: float = 60,
        catalog: str = "default",
        snapshots: Snapshots | None = None,
    ) -> None:
        self.host = host  # the swarm manager (any DOCKER_HOST form); None: the docker backend's engine
        self.snapshots = snapshots  # where Hub Spaces are downloaded to build from, as for the docker backend
        self.base_image = base_image
        self.memory = memory
        self.cpus = cpus
        self.pids = pids
        self.ready_timeout_s = ready_timeout_s
        self.catalog = catalog
        self._client: docker.DockerClient | None = None
        self._lock = threading.Lock()
        self._nodes: dict[str, tuple[float, _Node]] = {}
        self._logs = _Logs()

    @property
    def client(self) -> docker.DockerClient:
        with self._lock:
            if self._client is None:
                try:
                    self._client = engine_client(self.host)
                except DockerException as exc:
                    raise BackendUnavailableError(
                        f"the swarm backend cannot reach a Docker engine ({exc}); "
                        "start Docker, or set ENVHUB_SWARM_HOST to a swarm manager"
                    ) from exc
            return self._client

    def check(self, environment: EnvironmentDetail, options: SwarmOptions, token: str | None = None) -> SwarmOptions:
        completed = image_options(environment, options)
        self._swarm()
        if completed.image is None and not environment.path:
            check_space_build(environment, self.snapshots, token)
        return completed

    def _swarm(self) -> dict[str, Any]:
        """The engine's view of its swarm; BackendUnavailableError unless it is a manager of one."""
        try:
            swarm: dict[str, Any] = self.client.info().get("Swarm") or {}
        except (DockerException, requests.RequestException) as exc:
            raise BackendUnavailableError(f"the swarm backend cannot reach its Docker engine ({exc})") from exc
        if swarm.get("LocalNodeState") != "active" or not swarm.get("ControlAvailable"):
            raise _not_a_manager()
        return swarm

    def start(self, spec: LaunchSpec[SwarmOptions], report: Report) -> Launched[ServiceHandle]:
        port = spec.options.port or 8000
        built = Image(spec.options.image) if spec.options.image else None
        built = built or environment_image(
            self.client, spec.environment, self.snapshots, spec.token, self.base_image, spec.log_path, report, port
        )
        image = built.tag
        if not spec.options.image and int(self._swarm().get("Nodes") or 1) > 1:
            report(f"{image} was built on the manager only: nodes that do not have it reject its tasks")
        labels = {CATALOG_LABEL: self.catalog, LABEL: spec.server_id, ENVIRONMENT_LABEL: spec.environment.id}
        resources = Resources(cpu_limit=int(self.cpus * 1e9), mem_limit=parse_bytes(self.memory))
        resources["Limits"]["Pids"] = self.pids  # the engine takes it (API 1.41) but the SDK has no argument
        report(f"creating a swarm service of {image} with {spec.replicas} task(s)")
        try:
            service: Service = self.client.services.create(
                image,
                name=f"envhub-{spec.server_id}",
                env=[f"{name}={value}" for name, value in spec.env.items()],
                labels=labels,
                container_labels=labels,
                mode=ServiceMode("replicated", replicas=spec.replicas),
                # No PublishedPort: each task's node picks a free port of its own.
                endpoint_spec=EndpointSpec(ports=[{"Protocol": "tcp", "TargetPort": port, "PublishMode": "host"}]),
                resources=resources,
                restart_policy=RestartPolicy(condition="any", delay=_RESTART_DELAY_NS),
                constraints=list(spec.options.constraints),
                stop_grace_period=_STOP_GRACE_NS,
                init=True,
            )
        except APIError as exc:
            raise LaunchError(f"the swarm could not create a service of {image}: {exc.explanation or exc}") from exc
        handle = ServiceHandle(server=spec.server_id, service=service.id, image=image, port=port)
        self._logs.follow(self.client, service.id, spec.log_path)
        try:
            url = self._first_healthy(handle, spec)
        except BaseException:
            self.stop(handle)
            raise
        return Launched(url, handle, built.note)

    def _first_healthy(self, handle: ServiceHandle, spec: LaunchSpec[SwarmOptions]) -> str:
        """The URL of the first task that answers /health; LaunchError when none does in time, or tasks keep failing."""
        what = f"the swarm service of {spec.environment.id}"
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            history = self._raw_tasks(handle)
            if history is None:
                raise LaunchError(f"{what} was removed while it started")
            running = [task for task in self._current(history, handle) if task.running and task.url]
            if running:
                task_id, url = running[0].id, running[0].url or ""
                try:
                    wait_healthy(
                        url,
                        timeout_s=max(deadline - time.monotonic(), 0.1),
                        alive=partial(self._is_task_running, task_id),
                        what=f"task {task_id[:12]} of {what}",
                        log_path=spec.log_path,
                    )
                    return url
                except LaunchError:
                    if time.monotonic() >= deadline:
                        raise
                    # It ended before it answered: the swarm replaces it, and its failure counts below.
            ended = [t for t in history if (t.get("Status") or {}).get("State") in _ENDED]
            if len(ended) >= _GIVE_UP_AFTER and not running:
                failing = f"{what} keeps failing: {_reason(ended)}"
                raise LaunchError(failing + tail_note(spec.log_path), code="tasks_keep_failing")
            if time.monotonic() >= deadline:
                raise LaunchError(
                    f"no task of {what} was running within {self.ready_timeout_s:g} s: {_reason(history)}"
                    + tail_note(spec.log_path),
                    code="task_start_timeout",
                )
            time.sleep(0.25)

    def _raw_tasks(self, handle: ServiceHandle) -> list[dict[str, Any]] | None:
        """Every task of the service the swarm still keeps, shut down ones too; None when the service is gone."""
        try:
            self.client.api.inspect_service(handle.service)
            tasks: list[dict[str, Any]] = self.client.api.tasks(filters={"service": handle.service})
        except NotFound:
            return None
        return tasks

    def _is_task_running(self, task_id: str) -> bool:
        try:
            task: dict[str, Any] = self.client.api.inspect_task(task_id)
        except NotFound:
            return False
        except (DockerException, requests.RequestException):
            return True  # the engine did not answer this once: the deadline decides
        return (task.get("Status") or {}).get("State") == "running"

    def _current(self, raw: list[dict[str, Any]], handle: ServiceHandle) -> list[Task]:
        mine = [t for t in raw if t.get("DesiredState") not in _LET_GO]
        mine.sort(key=lambda t: (int(t.get("Slot") or 0), str(t.get("CreatedAt", ""))))
        return [self._task(t, handle.port) for t in mine]

    def _task(self, raw: dict[str, Any], port: int) -> Task:
        status = raw.get("Status") or {}
        state = str(status.get("State", ""))
        ports = [p for p in (status.get("PortStatus") or {}).get("Ports") or [] if p.get("TargetPort") == port]
        node = self._node(str(raw.get("NodeID") or ""))
        published = ports[0].get("PublishedPort") if ports else None
        address = f"[{node.addr}]" if ":" in node.addr else node.addr
        return Task(
            id=str(raw["ID"]),
            state=state,
            url=f"http://{address}:{published}" if published and node.addr else None,
            host=node.host,
            error=str(status.get("Err") or ""),
            started_at=_timestamp(status.get("Timestamp")) if state == "running" else None,
        )

    def _node(self, node_id: str) -> _Node:
        """A node's address and name, looked up once in a while (a task names its node by id)."""
        if not node_id:
            return _Node("", "")  # not placed yet
        with self._lock:
            known = self._nodes.get(node_id)
        if known is not None and known[0] > time.monotonic():
            return known[1]
        try:
            attrs: dict[str, Any] = self.client.nodes.get(node_id).attrs
        except NotFound:
            return _Node("", node_id[:12])  # it left the swarm
        addr = str((attrs.get("Status") or {}).get("Addr") or "")
        if addr in ("", "0.0.0.0"):  # noqa: S104 - what a node says when it does not know its address
            manager = str((attrs.get("ManagerStatus") or {}).get("Addr") or "")  # "10.0.0.1:2377"
            addr = manager.rpartition(":")[0].strip("[]") if manager else ""
            if addr in ("", "0.0.0.0"):  # noqa: S104
                addr = self._engine_address()
        hostname = str((attrs.get("Description") or {}).get("Hostname") or node_id[:12])
        labels = (attrs.get("Spec") or {}).get("Labels") or {}
        marks = ", ".join(f"{name}={value}" if value else name for name, value in sorted(labels.items()))
        node = _Node(addr, f"{hostname} ({marks})" if marks else hostname)
        with self._lock:
            self._nodes[node_id] = (time.monotonic() + _NODE_TTL_S, node)
        return node

    def _engine_address(self) -> str:
        """The address of the engine envhub talks to: its TCP host, or loopback for a local socket."""
        url = urlsplit(str(self.client.api.base_url))
        return url.hostname if url.scheme in ("http", "https") and url.hostname else "127.0.0.1"

    def tasks(self, handle: ServiceHandle) -> list[Task]:
        try:
            raw = self._raw_tasks(handle)
            return [] if raw is None else self._current(raw, handle)
        except (DockerException, requests.RequestException) as exc:
            raise BackendUnavailableError(f"the swarm backend cannot reach its Docker engine ({exc})") from exc

    def scale(self, handle: ServiceHandle, replicas: int) -> None:
        for attempt in range(3):
            try:
                self.client.services.get(handle.service).scale(replicas)
                return
            except NotFound as exc:
                raise LaunchError(f"the swarm service of endpoint {handle.server} is gone") from exc
            except APIError as exc:
                if "out of sequence" in str(exc) and attempt < 2:
                    continue  # updated meanwhile (by a replacement, say): again, on its new version
                raise LaunchError(f"the swarm could not scale {handle.server}: {exc.explanation or exc}") from exc

    def is_running(self, handle: ServiceHandle) -> bool:
        """Whether the service exists: the swarm keeps one whose tasks all fail, and tasks() tells the rest."""
        try:
            self.client.api.inspect_service(handle.service)
        except (DockerException, requests.RequestException):
            return False
        return True

    def stop(self, handle: ServiceHandle) -> None:
        self._remove(handle.service)

    def _remove(self, service_id: str) -> None:
        self._logs.end(service_id)
        with suppress(NotFound):  # already gone
            self.client.api.remove_service(service_id)

    def _ours(self, *labels: str) -> list[Service]:
        filters = {"label": [f"{CATALOG_LABEL}={self.catalog}", *labels]}
        try:
            services: list[Service] = self.client.services.list(filters=filters)
        except APIError as exc:
            if exc.status_code == 503:  # "This node is not a swarm manager."
                raise _not_a_manager() from exc
            raise
        return services

    def managed_servers(self) -> set[str]:
        return {str(labels[LABEL]) for s in self._ours() if LABEL in (labels := s.attrs["Spec"].get("Labels") or {})}

    def stop_leftover(self, server_id: str) -> None:
        for service in self._ours(f"{LABEL}={server_id}"):
            self._remove(service.id)

    def auth_headers(self, handle: ServiceHandle) -> dict[str, str]:
        return {}

    def sweep(self, live_instances: set[str]) -> None:
        """Nothing is started ahead of a swarm launch."""

    def close(self) -> None:
        """End the log copies, then let go of the engine; the services run on."""
        self._logs.end_all()
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


def _not_a_manager() -> BackendUnavailableError:
    return BackendUnavailableError(
        "the swarm backend needs a Docker engine that is a swarm manager: run `docker swarm init` "
        "(or set ENVHUB_SWARM_HOST)",
        code=NOT_A_MANAGER,
    )
