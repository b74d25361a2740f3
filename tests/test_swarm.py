"""The swarm backend on a real single-node Docker Swarm: a service's tasks as replicas, replaced, scaled, placed."""

import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import docker
import httpx
import pytest

from catalog.models import EnvironmentDetail, Source
from core.errors import BackendUnavailableError, LaunchError
from hosting.models import Backend
from hosting.options import SwarmOptions
from hosting.runtimes.base import AnyRuntime, Launched, LaunchSpec, Task, is_service
from hosting.runtimes.engine import CATALOG_LABEL, LABEL
from hosting.runtimes.snapshots import Snapshots
from hosting.runtimes.swarm import ServiceHandle, SwarmRuntime
from tests.conftest import eventually
from tests.environments import write_count_env
from tests.fakehub import FakeHub
from tests.swarm import BASE_IMAGE, needs_swarm


@pytest.fixture
def catalog(tmp_path: Path) -> str:
    return f"test-swarm-{secrets.token_hex(4)}"


@pytest.fixture
def runtime(swarm: docker.DockerClient, catalog: str) -> Iterator[SwarmRuntime]:
    """The backend on the local swarm, in a catalog of the test's own; its services are removed after."""
    backend = SwarmRuntime(base_image=BASE_IMAGE, ready_timeout_s=60, catalog=catalog)
    yield backend
    backend.close()
    for service in swarm.services.list(filters={"label": f"{CATALOG_LABEL}={catalog}"}):
        service.remove()


@pytest.fixture
def environment(tmp_path: Path) -> EnvironmentDetail:
    """The count environment as a template folder with a Dockerfile (its image is reused while it is unchanged)."""
    folder = write_count_env(tmp_path / "count")
    return EnvironmentDetail(id="template:count", source=Source.TEMPLATE, title="Count", path=str(folder))


def launch(
    runtime: SwarmRuntime, environment: EnvironmentDetail, tmp_path: Path, *, replicas: int = 1, **options: Any
) -> Launched[ServiceHandle]:
    checked = runtime.check(environment, SwarmOptions(**options))
    server = "sw" + secrets.token_hex(4)
    spec = LaunchSpec(server, environment, tmp_path / f"{server}.log", checked, replicas=replicas)
    return runtime.start(spec, lambda _: None)


def running(runtime: SwarmRuntime, handle: ServiceHandle) -> Callable[[], list[Task]]:
    return lambda: [task for task in runtime.tasks(handle) if task.running]


def answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def plays(url: str) -> bool:
    health = httpx.get(f"{url}/health", timeout=5)
    reset = httpx.post(f"{url}/reset", json={}, timeout=5)
    return health.status_code == 200 and reset.status_code == 200 and reset.json()["observation"]["total"] == 0


@needs_swarm
def test_a_service_runs_its_replicas_as_tasks_each_reachable(
    runtime: SwarmRuntime, environment: EnvironmentDetail, tmp_path: Path, swarm: docker.DockerClient
) -> None:
    generic: AnyRuntime = runtime
    assert is_service(generic)  # envhub keeps its pools by the tasks it reports
    launched = launch(runtime, environment, tmp_path, replicas=2)

    tasks = eventually(running(runtime, launched.handle), lambda tasks: len(tasks) == 2)
    urls = {task.url for task in tasks}
    assert len(urls) == 2, "each task publishes a port of its own"
    assert launched.url in urls
    # The launch waited for one task's server; the other's may still be starting.
    eventually(lambda: [task.url for task in tasks], lambda found: all(url and answers(url) for url in found), 60)
    for task in tasks:
        assert task.url is not None and plays(task.url)
        assert task.host == swarm.info()["Name"]
        assert task.started_at is not None and task.error == ""

    spec = swarm.services.get(launched.handle.service).attrs["Spec"]
    assert spec["Name"] == f"envhub-{launched.handle.server}"
    assert spec["Labels"][LABEL] == launched.handle.server
    assert spec["EndpointSpec"]["Ports"] == [{"Protocol": "tcp", "TargetPort": 8000, "PublishMode": "host"}]
    limits = spec["TaskTemplate"]["Resources"]["Limits"]
    assert limits == {"NanoCPUs": 1_000_000_000, "MemoryBytes": 2 * 1024**3, "Pids": 512}
    assert spec["TaskTemplate"]["ContainerSpec"]["Init"] is True
    log = tmp_path / f"{launched.handle.server}.log"
    eventually(lambda: log.read_text() if log.is_file() else "", lambda text: "Uvicorn running" in text, 10)


@needs_swarm
def test_a_hub_space_runs_as_a_service_of_its_image_built_at_its_commit(
    swarm: docker.DockerClient, catalog: str, hub: FakeHub, tmp_path: Path
) -> None:
    folder = write_count_env(tmp_path / "space")  # a Docker Space: its Dockerfile at the root
    files = {path.relative_to(folder).as_posix(): path.read_text() for path in folder.rglob("*") if path.is_file()}
    hub.add_space("alice/count", files=files)
    sha = str(httpx.get(f"{hub.url}/api/spaces/alice/count").json()["sha"])
    snapshots = Snapshots(tmp_path / "spaces", hub.url, None)
    runtime = SwarmRuntime(base_image=BASE_IMAGE, ready_timeout_s=60, catalog=catalog, snapshots=snapshots)
    environment = EnvironmentDetail(id="alice/count", source=Source.HUB, title="Count", sdk="docker", sha=sha)
    try:
        launched = launch(runtime, environment, tmp_path)
        assert plays(launched.url)
        spec = swarm.services.get(launched.handle.service).attrs["Spec"]
        assert spec["TaskTemplate"]["ContainerSpec"]["Image"].startswith(f"envhub-space/alice-count:{sha[:12]}")
    finally:
        runtime.close()
        for service in swarm.services.list(filters={"label": f"{CATALOG_LABEL}={catalog}"}):
            service.remove()


@needs_swarm
def test_the_swarm_replaces_a_task_that_dies(
    runtime: SwarmRuntime, environment: EnvironmentDetail, tmp_path: Path, swarm: docker.DockerClient
) -> None:
    launched = launch(runtime, environment, tmp_path, replicas=2)
    before = eventually(running(runtime, launched.handle), lambda tasks: len(tasks) == 2)
    [killed] = [t for t in swarm.api.tasks(filters={"service": launched.handle.service}) if t["ID"] == before[0].id]
    swarm.containers.get(killed["Status"]["ContainerStatus"]["ContainerID"]).kill()

    after = eventually(
        running(runtime, launched.handle),
        lambda tasks: len(tasks) == 2 and before[0].id not in {t.id for t in tasks},
    )
    [replacement] = [t for t in after if t.id not in {b.id for b in before}]
    assert replacement.url is not None
    eventually(lambda: answers(replacement.url or ""), bool)  # running, and then importing its app a while
    assert plays(replacement.url)
    assert runtime.is_running(launched.handle)


@pytest.fixture
def node_label(swarm: docker.DockerClient) -> Iterator[str]:
    """A label of the test's own on the swarm's node (envhub-test=<value>), removed after."""
    node = swarm.nodes.get(swarm.info()["Swarm"]["NodeID"])
    value = secrets.token_hex(3)
    node.update({**node.attrs["Spec"], "Labels": {**(node.attrs["Spec"].get("Labels") or {}), "envhub-test": value}})
    yield value
    node.reload()
    labels = {k: v for k, v in (node.attrs["Spec"].get("Labels") or {}).items() if k != "envhub-test"}
    node.update({**node.attrs["Spec"], "Labels": labels})


@needs_swarm
def test_a_service_scales_on_the_nodes_its_constraints_name(
    runtime: SwarmRuntime, environment: EnvironmentDetail, tmp_path: Path, swarm: docker.DockerClient, node_label: str
) -> None:
    launched = launch(runtime, environment, tmp_path, constraints=[f"node.labels.envhub-test=={node_label}"])
    runtime.scale(launched.handle, 3)
    tasks = eventually(running(runtime, launched.handle), lambda tasks: len(tasks) == 3)
    assert len({task.url for task in tasks}) == 3
    assert {task.host for task in tasks} == {f"{swarm.info()['Name']} (envhub-test={node_label})"}

    runtime.scale(launched.handle, 1)
    eventually(lambda: runtime.tasks(launched.handle), lambda tasks: len(tasks) == 1)


@needs_swarm
def test_constraints_no_node_meets_fail_the_launch_and_remove_the_service(
    runtime: SwarmRuntime, environment: EnvironmentDetail, tmp_path: Path, swarm: docker.DockerClient, catalog: str
) -> None:
    runtime.ready_timeout_s = 3
    started = time.monotonic()
    with pytest.raises(LaunchError) as failed:
        launch(runtime, environment, tmp_path, constraints=["node.labels.nothing==true"])
    assert time.monotonic() - started < 10
    assert failed.value.code == "task_start_timeout"
    assert "no suitable node" in failed.value.message  # the swarm's own words for why, passed on
    assert swarm.services.list(filters={"label": f"{CATALOG_LABEL}={catalog}"}) == []


@needs_swarm
def test_a_server_that_exits_fails_the_launch_before_the_deadline(
    runtime: SwarmRuntime, environment: EnvironmentDetail, tmp_path: Path, swarm: docker.DockerClient, catalog: str
) -> None:
    # The base image's command is python3, which exits at once without a terminal.
    started = time.monotonic()
    with pytest.raises(LaunchError) as failed:
        launch(runtime, environment, tmp_path, image=BASE_IMAGE)
    assert failed.value.code == "tasks_keep_failing"
    assert "its latest task is complete" in failed.value.message  # the swarm's own state of its task, passed on
    assert time.monotonic() - started < 30, "three tasks ended: no need to wait out the launch timeout"
    assert swarm.services.list(filters={"label": f"{CATALOG_LABEL}={catalog}"}) == []


@needs_swarm
def test_leftover_and_stopped_services_are_removed(
    runtime: SwarmRuntime, environment: EnvironmentDetail, tmp_path: Path, swarm: docker.DockerClient
) -> None:
    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda _: launch(runtime, environment, tmp_path), range(2))
    assert runtime.managed_servers() == {first.handle.server, second.handle.server}
    other = SwarmRuntime(catalog="another-catalog")
    try:
        assert other.managed_servers() == set(), "another catalog's services are not its own"
    finally:
        other.close()

    runtime.stop_leftover(first.handle.server)
    runtime.stop(second.handle)
    runtime.stop(second.handle)  # gone already: nothing to do

    assert runtime.managed_servers() == set()
    assert not runtime.is_running(first.handle) and not runtime.is_running(second.handle)
    assert runtime.tasks(second.handle) == []
    # The copies of their logs end with them.
    names = {f"logs-{launched.handle.service[:12]}" for launched in (first, second)}
    eventually(lambda: {t.name for t in threading.enumerate()} & names, lambda alive: not alive, 5)


def test_an_unreachable_engine_is_unavailable(environment: EnvironmentDetail, tmp_path: Path) -> None:
    runtime = SwarmRuntime(f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(BackendUnavailableError):
        runtime.check(environment, SwarmOptions())
    runtime.close()


class _Engine(BaseHTTPRequestHandler):
    """A Docker engine that is not a swarm manager: enough of its API for the client to ask."""

    swarm: ClassVar[dict[str, Any]] = {}

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path.endswith("/version"):
            self._reply(200, {"ApiVersion": "1.41", "Version": "20.10.24"})
        elif path.endswith("/info"):
            self._reply(200, {"Name": "not-a-manager", "Swarm": self.swarm})
        elif path.endswith("/services"):
            self._reply(503, {"message": "This node is not a swarm manager."})
        else:
            self._reply(404, {"message": f"no {path} here"})

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.parametrize(
    "swarm_state",
    [
        {"LocalNodeState": "inactive", "ControlAvailable": False},
        {"LocalNodeState": "active", "ControlAvailable": False},
    ],
    ids=["no-swarm", "worker"],
)
def test_an_engine_that_is_not_a_swarm_manager_is_unavailable(
    environment: EnvironmentDetail, swarm_state: dict[str, Any]
) -> None:
    handler = type("Engine", (_Engine,), {"swarm": swarm_state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    runtime = SwarmRuntime(f"tcp://127.0.0.1:{server.server_address[1]}")
    try:
        assert runtime.name == Backend.SWARM
        with pytest.raises(BackendUnavailableError) as unavailable:
            runtime.check(environment, SwarmOptions())
        assert unavailable.value.code == "not_a_swarm_manager"
        with pytest.raises(BackendUnavailableError) as unavailable:
            runtime.managed_servers()
        assert unavailable.value.code == "not_a_swarm_manager"
    finally:
        runtime.close()
        server.shutdown()
        server.server_close()
