"""An endpoint's URL outlives a restart of envhub, and stopping envhub at any moment of a launch leaves no server.

Each test serves `python -m app serve` as a user runs it, stops it with SIGINT (Ctrl-C) and starts it again on the
same data folder and database, then plays the same URL with openenv's client.
"""

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient

from app.settings import Settings
from hosting.runtimes.engine import LABEL
from tests.conftest import eventually, wait_until
from tests.environments import write_count_env
from tests.serving import free_port
from tests.test_containers import BASE_IMAGE, docker_engine, needs_docker  # noqa: F401 (a fixture)
from tests.test_endpoints import serve_env, server_pids
from tests.test_serve import Server

pytestmark = [
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="finding servers by their environment needs /proc"),
    pytest.mark.timeout(400),  # two or three envhubs start, one after the other
]

STARTUP_S = 90  # importing the app takes a while on a loaded machine


class Envhub(Server):
    """`python -m app serve` on one data folder and database, started again as often as a test likes."""

    def __init__(self, env: dict[str, str], port: int) -> None:
        super().__init__(env, port)
        wait_until(self.healthy, timeout_s=STARTUP_S)

    def endpoint(self, endpoint_id: str) -> dict[str, Any]:
        found: dict[str, Any] = httpx.get(f"{self.url}/api/endpoints/{endpoint_id}", timeout=30).json()
        return found

    def launch(self, environment: str, **body: Any) -> str:
        response = httpx.post(f"{self.url}/api/endpoints", json={"environment": environment, **body}, timeout=60)
        assert response.status_code == 201, response.text
        endpoint_id: str = response.json()["id"]
        return endpoint_id

    def running(self, endpoint_id: str) -> dict[str, Any]:
        wait_until(lambda: self.endpoint(endpoint_id)["status"] != "starting", timeout_s=120)
        endpoint = self.endpoint(endpoint_id)
        assert endpoint["status"] == "running", endpoint["message"]
        return endpoint


@pytest.fixture
def served(settings: Settings, tmp_path: Path) -> Iterator[Callable[..., Envhub]]:
    """Start envhub on the test's data folder, database and port (again and again); each is stopped at the end."""
    started: list[Envhub] = []
    port = free_port()

    def start(**values: str) -> Envhub:
        env = serve_env(settings, tmp_path) | {f"ENVHUB_{k.upper()}": v for k, v in values.items()}
        started.append(Envhub(env, port))
        return started[-1]

    yield start
    for envhub in started:
        envhub.stop()


def plays(url: str) -> None:
    """openenv's client, configured with the URL alone, resets and steps through it."""
    with GenericEnvClient(base_url=url).sync() as client:
        assert client.reset().observation["total"] == 0
        assert client.step({"add": 4}).observation["total"] == 4


def servers_of(endpoint_id: str) -> list[int]:
    """The processes serving any replica of the endpoint (its first replica has its id, the next `<id>-2` ...)."""
    return server_pids(endpoint_id) + [pid for n in range(2, 6) for pid in server_pids(f"{endpoint_id}-{n}")]


def answers(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
    except httpx.TransportError:
        return False
    return True


def test_a_process_endpoints_url_answers_again_after_envhub_restarts(
    served: Callable[..., Envhub], count_template: str
) -> None:
    first = served()
    endpoint_id = first.launch(count_template)
    url = first.running(endpoint_id)["url"]
    plays(url)
    [replica] = first.endpoint(endpoint_id)["pool"]["replicas"]
    port = int(replica["internal_url"].rsplit(":", 1)[1])
    first.interrupt()

    assert not servers_of(endpoint_id)  # its server went with envhub
    assert not answers(port)

    again = served()
    restarted = again.running(endpoint_id)
    assert restarted["url"] == url
    plays(url)
    assert [r["status"] for r in restarted["pool"]["replicas"]] == ["stopped", "ready"]  # started again
    again.interrupt()
    assert not servers_of(endpoint_id)


def slow_template(templates_dir: Path) -> str:
    """The count game, whose server takes a few seconds to import: a launch has a moment where it has started and
    does not answer yet."""
    app = write_count_env(templates_dir / "slow") / "server" / "app.py"
    app.write_text("import time\ntime.sleep(3)\n" + app.read_text())
    return "template:slow"


def _posted(envhub: Envhub, endpoint_id: str) -> bool:
    return True


def _server_started(envhub: Envhub, endpoint_id: str) -> bool:
    return bool(servers_of(endpoint_id)) and envhub.endpoint(endpoint_id)["status"] == "starting"


def _ready(envhub: Envhub, endpoint_id: str) -> bool:
    return bool(envhub.endpoint(endpoint_id)["status"] == "running")


@pytest.mark.parametrize(
    "moment",
    # The default run stops envhub once a server is ready; the earlier moments (the launch just posted, a server
    # started and not yet ready) walk the same shutdown and run with `make test-all`.
    [pytest.param(_posted, marks=pytest.mark.slow), pytest.param(_server_started, marks=pytest.mark.slow), _ready],
    ids=["posted", "server-started", "ready"],
)
def test_ctrl_c_at_any_moment_of_a_process_launch_leaves_no_server_and_the_endpoint_comes_back(
    served: Callable[..., Envhub], templates_dir: Path, moment: Callable[[Envhub, str], bool]
) -> None:
    environment = slow_template(templates_dir)
    first = served()
    endpoint_id = first.launch(environment)
    wait_until(lambda: moment(first, endpoint_id), timeout_s=60, interval_s=0.05)
    first.interrupt()
    assert not servers_of(endpoint_id)

    again = served()
    url = again.running(endpoint_id)["url"]
    plays(url)
    again.interrupt()
    assert not servers_of(endpoint_id)


# -- docker


def containers_of(engine: docker.DockerClient, endpoint_id: str) -> dict[str, str]:
    """The endpoint's containers, by the server (replica) each is labelled with: their status."""
    found = engine.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True)
    return {
        str(c.labels[LABEL]): str(c.status)
        for c in found
        if c.labels[LABEL] == endpoint_id or str(c.labels[LABEL]).startswith(f"{endpoint_id}-")
    }


def _not_served(answer: httpx.Response) -> bool:
    return answer.status_code == 404  # the gateway trusts what it read of a pool for 2 s


def engine_containers(engine: docker.DockerClient, endpoint_ids: list[str]) -> list[Any]:
    """Every container of these endpoints' servers, a claimed spare too (named after its server)."""
    found = engine.containers.list(all=True, ignore_removed=True)
    return [c for c in found if any(c.name.startswith(f"envhub-{e}") for e in endpoint_ids)]


@needs_docker
def test_a_docker_endpoint_is_adopted_by_the_next_envhub_and_a_launch_cut_short_leaves_no_container(
    served: Callable[..., Envhub],
    count_template: str,
    templates_dir: Path,
    docker_engine: docker.DockerClient,  # noqa: F811
) -> None:
    launched: list[str] = []
    try:
        slow = slow_template(templates_dir)
        docker_settings = {"docker_base_image": BASE_IMAGE, "docker_spares": "0"}  # each launch starts its container
        first = served(**docker_settings)
        endpoint_id = first.launch(count_template, backend="docker")
        launched.append(endpoint_id)
        url = first.running(endpoint_id)["url"]
        plays(url)
        cut_short = first.launch(slow, backend="docker")
        launched.append(cut_short)

        def its_container_starts() -> bool:
            return bool(containers_of(docker_engine, cut_short)) and first.endpoint(cut_short)["status"] == "starting"

        wait_until(its_container_starts, timeout_s=180, interval_s=0.05)
        first.interrupt()
        assert containers_of(docker_engine, endpoint_id) == {endpoint_id: "running"}  # it serves on without envhub

        again = served(**docker_settings)
        adopted = again.running(endpoint_id)
        assert [(r["id"], r["status"]) for r in adopted["pool"]["replicas"]] == [(endpoint_id, "ready")]
        plays(url)
        back = again.running(cut_short)  # started again under its id; what its launch had started is gone
        plays(back["url"])
        assert containers_of(docker_engine, cut_short) == {r["id"]: "running" for r in back["pool"]["replicas"][-1:]}

        for stopped in (endpoint_id, cut_short):
            assert httpx.delete(f"{again.url}/api/endpoints/{stopped}", timeout=60).json()["status"] == "stopped"
            assert containers_of(docker_engine, stopped) == {}
            gone = eventually(partial(httpx.get, f"{again.url}/endpoints/{stopped}/health"), _not_served, timeout_s=5)
            assert (gone.status_code, gone.json()["code"]) == (404, "endpoint_stopped")
    finally:  # containers outlive envhub: a failed test's must not
        for left in engine_containers(docker_engine, launched):
            left.remove(force=True)
