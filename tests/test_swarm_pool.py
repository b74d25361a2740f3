"""An endpoint pool on the swarm backend through envhub's gateway, on a real single-node Docker Swarm: sessions
routed over the service's tasks, a task that dies lost and replaced, the service removed when the endpoint stops."""

import json
import logging
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import docker
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from app.settings import Settings
from hosting.runtimes.engine import CATALOG_LABEL, LABEL
from tests.conftest import eventually
from tests.serving import Envhub
from tests.swarm import BASE_IMAGE, needs_swarm

log = logging.getLogger(__name__)

REPLACED_WITHIN_S = 60  # the swarm's restart delay, then the image's server importing its app for several seconds


@pytest.fixture
def swarm_envhub(
    settings: Settings, tmp_path: Path, count_template: str, swarm: docker.DockerClient
) -> Iterator[Envhub]:
    """envhub on loopback, building templates on the base image; the services of its catalog are removed after."""
    configured = settings.model_copy(
        update={"data_dir": tmp_path / "data", "docker_base_image": BASE_IMAGE, "launch_timeout_s": 60}
    )
    envhub = Envhub(configured)
    yield envhub
    envhub.stop()
    for service in swarm.services.list(filters={"label": f"{CATALOG_LABEL}={configured.catalog_id()}"}):
        service.remove()


def ready(pool: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in pool["replicas"] if r["status"] == "ready"]


def services_of(swarm: docker.DockerClient, endpoint_id: str) -> list[Any]:
    return list(swarm.services.list(filters={"label": f"{LABEL}={endpoint_id}"}))


def send(ws: ClientConnection, kind: str, data: dict[str, Any]) -> dict[str, Any]:
    ws.send(json.dumps({"type": kind, "data": data}))
    answer: dict[str, Any] = json.loads(ws.recv(timeout=30))
    return answer


def plays(ws: ClientConnection, adds: int) -> int:
    """Reset, then step `adds` ones; the total the server counted."""
    assert send(ws, "reset", {})["data"]["observation"]["total"] == 0
    total = 0
    for _ in range(adds):
        answer = send(ws, "step", {"add": 1})
        assert answer["type"] == "observation", answer
        total = answer["data"]["observation"]["total"]
    return total


@pytest.mark.timeout(300)
@needs_swarm
def test_a_swarm_pool_routes_sessions_over_its_tasks_and_replaces_one_that_dies(
    swarm_envhub: Envhub, count_template: str, swarm: docker.DockerClient
) -> None:
    envhub = swarm_envhub
    node = swarm.info()["Name"]
    began = time.monotonic()

    # 1. Two tasks of one service, each a ready replica of its own.
    options = {"replicas": 2, "env": {"MAX_CONCURRENT_ENVS": "2"}}
    launched = envhub.launch(count_template, backend="swarm", options=options)
    endpoint_id = launched["id"]
    endpoint = envhub.wait_status(endpoint_id, "running", "failed", timeout_s=120)
    assert endpoint["status"] == "running", endpoint["message"]
    pool = eventually(lambda: envhub.endpoint(endpoint_id)["pool"], lambda p: len(ready(p)) == 2)
    log.info("running, with 2 ready replicas, in %.1f s", time.monotonic() - began)
    replicas = ready(pool)
    assert (pool["min"], pool["max"], pool["capacity"]) == (2, 2, 4)
    assert len({r["internal_url"] for r in replicas}) == 2, "each task publishes a port of its own"
    for replica in replicas:
        assert replica["internal_url"].startswith("http://")
        assert replica["host"].split(" (")[0] == node
        assert (replica["capacity"], replica["capacity_said"]) == (2, True)  # MAX_CONCURRENT_ENVS
        assert replica["started_at"] is not None
    [service] = services_of(swarm, endpoint_id)
    tasks = {t["ID"]: t for t in service.tasks(filters={"desired-state": "running"})}
    assert set(tasks) == {r["id"] for r in replicas}, "a replica is a task of the service"

    # 2. Four sessions at once through the one URL: two on each task.
    ws_url = endpoint["url"].replace("http://", "ws://") + "/ws"
    with ExitStack() as stack:
        sessions = [stack.enter_context(connect(ws_url, open_timeout=30)) for _ in range(4)]
        for ws in sessions:
            ws.send(json.dumps({"type": "reset", "data": {}}))
        for ws in sessions:
            reset = json.loads(ws.recv(timeout=30))
            assert (reset["type"], reset["data"]["observation"]["total"]) == ("observation", 0), reset
        for ws in sessions:
            step = send(ws, "step", {"add": 1})
            assert (step["type"], step["data"]["observation"]["total"]) == ("observation", 1), step
        pool = envhub.endpoint(endpoint_id)["pool"]
        assert {r["id"]: r["sessions"] for r in ready(pool)} == {r["id"]: 2 for r in replicas}
        assert pool["sessions"] == 4

        # 3. One task's container killed: its sessions are told they were lost, the others play on.
        killed = replicas[0]["id"]
        container = swarm.containers.get(tasks[killed]["Status"]["ContainerStatus"]["ContainerID"])
        container.kill()
        killed_at = time.monotonic()
        lost: list[ConnectionClosed] = []
        alive: list[ClientConnection] = []
        for ws in sessions:
            try:
                step = send(ws, "step", {"add": 1})
            except ConnectionClosed as closed:
                lost.append(closed)
                continue
            assert (step["type"], step["data"]["observation"]["total"]) == ("observation", 2), step
            alive.append(ws)
        said = [(c.rcvd.code, c.rcvd.reason) if c.rcvd else None for c in lost]
        log.info("the killed task's sessions closed %.1f s after the kill: %s", time.monotonic() - killed_at, said)
        assert len(lost) == 2 and len(alive) == 2, said
        for frame in [c.rcvd for c in lost]:
            assert frame is not None, said
            assert frame.code == 1011, said
            assert f"endpoint {endpoint_id} lost this session" in frame.reason, said

        # The swarm replaces the task, and the pool has two ready replicas again, one of them new.
        def healed(pool: dict[str, Any]) -> bool:
            ids = {r["id"] for r in ready(pool)}
            return len(ids) == 2 and killed not in ids and any(e["kind"] == "lost" for e in pool["events"])

        pool = eventually(lambda: envhub.endpoint(endpoint_id)["pool"], healed, REPLACED_WITHIN_S)
        log.info("two ready replicas again %.1f s after the kill", time.monotonic() - killed_at)
        [new] = [r for r in ready(pool) if r["id"] not in {r["id"] for r in replicas}]
        assert new["host"].split(" (")[0] == node
        [gone] = [r for r in pool["replicas"] if r["id"] == killed]
        assert gone["status"] == "failed"
        for ws in alive:  # still on the task that lives
            step = send(ws, "step", {"add": 1})
            assert step["data"]["observation"]["total"] == 3, step

        # A new session: the surviving task is full, so it plays on the replacement.
        with connect(ws_url, open_timeout=30) as again:
            assert plays(again, 2) == 2
            sessions_now = {r["id"]: r["sessions"] for r in ready(envhub.endpoint(endpoint_id)["pool"])}
            assert sessions_now[new["id"]] == 1, sessions_now
        log.info("a new session played %.1f s after the kill", time.monotonic() - killed_at)

    # 4. Stopping the endpoint removes its service.
    stopped = envhub.http.delete(f"/api/endpoints/{endpoint_id}")
    assert stopped.status_code == 200, stopped.text
    assert stopped.json()["status"] == "stopped"
    assert services_of(swarm, endpoint_id) == []
    log.info("the whole test took %.1f s", time.monotonic() - began)
