"""The docker backend against a real Docker engine: build, run, play through the gateway, stop, reconcile."""

import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
from docker.errors import DockerException
from docker.models.containers import Container
from openenv.core.generic_client import GenericEnvClient

from app.settings import Settings
from hosting.runtimes.engine import CATALOG_LABEL, LABEL, engine_client
from hosting.runtimes.images import space_image
from hosting.runtimes.spares import SPARE_LABEL, SPARE_PREFIX
from tests.conftest import ADMIN_TOKEN, needs, space_files, wait_until
from tests.environments import write_count_env
from tests.fakehub import FakeHub
from tests.serving import Envhub

BASE_IMAGE = os.environ.get("BASE_IMAGE", "envhub/python-base:3.11")


def _engine() -> docker.DockerClient | None:
    try:
        client = engine_client()
        client.ping()
    except DockerException:
        return None
    return client


ENGINE = _engine()
needs_docker = needs("docker", ENGINE is not None, "no Docker engine (start one with shared/scripts/docker-engine.sh)")


@pytest.fixture
def docker_engine() -> docker.DockerClient:
    assert ENGINE is not None
    try:
        ENGINE.images.get(BASE_IMAGE)
    except DockerException:
        pytest.fail(f"base image {BASE_IMAGE} is missing: run shared/scripts/docker-engine.sh")
    return ENGINE


@pytest.fixture
def docker_envhub(settings: Settings, tmp_path: Path, templates_dir: Path) -> Iterator[Envhub]:
    write_count_env(templates_dir / "count")
    configured = settings.model_copy(
        update={"data_dir": tmp_path / "data", "docker_base_image": BASE_IMAGE, "launch_timeout_s": 60}
    )
    envhub = Envhub(configured)
    yield envhub
    envhub.stop()


def managed_containers(client: docker.DockerClient) -> list[str]:
    return [str(c.labels[LABEL]) for c in client.containers.list(all=True, filters={"label": LABEL})]


def spares(client: docker.DockerClient, catalog: str) -> list[str]:
    """Ids of the unclaimed spare containers of a catalog."""
    found = client.containers.list(
        all=True, filters={"label": [SPARE_LABEL, f"{CATALOG_LABEL}={catalog}"]}, ignore_removed=True
    )
    return [str(c.id) for c in found if c.name.startswith(SPARE_PREFIX)]


def spare_answers(client: docker.DockerClient, catalog: str) -> bool:
    """One spare container runs and its server answers: by then envhub has it ready to hand out (it keeps a
    spare as soon as the container has its port, well before the server in it is up)."""
    found = spares(client, catalog)
    if len(found) != 1:
        return False
    container = client.containers.get(found[0])
    ports = (container.attrs["NetworkSettings"]["Ports"] or {}).values()
    host_port = next((binding[0]["HostPort"] for binding in ports if binding), None)
    if host_port is None:
        return False
    try:
        return httpx.get(f"http://127.0.0.1:{host_port}/health", timeout=2).is_success
    except httpx.HTTPError:
        return False


@needs_docker
def answers_health(container: Container) -> bool:
    ports = container.ports.get("8000/tcp") or []
    try:
        return bool(ports) and httpx.get(f"http://127.0.0.1:{ports[0]['HostPort']}/health", timeout=1).is_success
    except httpx.TransportError:
        return False


@pytest.mark.timeout(660)  # on an engine that never built it, the image's first build installs openenv's stack
def test_template_builds_runs_and_plays_in_a_container(
    docker_envhub: Envhub, docker_engine: docker.DockerClient
) -> None:
    endpoint = docker_envhub.launch("template:count", backend="docker")
    running = docker_envhub.wait_status(endpoint["id"], "running", "failed", timeout_s=600)
    assert running["status"] == "running", running["message"]
    container = docker_engine.containers.get(f"envhub-{endpoint['id']}")
    assert container.attrs["HostConfig"]["Memory"] == 2 * 1024**3
    assert container.attrs["HostConfig"]["PidsLimit"] == 512
    assert container.attrs["HostConfig"]["NanoCpus"] == 1_000_000_000

    with GenericEnvClient(base_url=running["url"]).sync() as client:
        client.reset(episode_id="in-docker")
        result = client.step({"add": 10})
        assert (result.done, result.reward) == (True, 1.0)
        assert client.state()["episode_id"] == "in-docker"

    stopped = docker_envhub.http.delete(f"/api/endpoints/{endpoint['id']}").json()
    assert stopped["status"] == "stopped"
    assert endpoint["id"] not in managed_containers(docker_engine)


@needs_docker
def test_a_launch_claims_the_container_started_ahead_for_it(
    settings: Settings, tmp_path: Path, templates_dir: Path, docker_engine: docker.DockerClient
) -> None:
    write_count_env(templates_dir / "count")
    configured = settings.model_copy(
        update={"data_dir": tmp_path / "data", "docker_base_image": BASE_IMAGE, "docker_spares": 1}
    )
    catalog = configured.catalog_id()
    envhub = Envhub(configured)
    try:
        envhub.running("template:count", backend="docker")
        wait_until(lambda: len(spares(docker_engine, catalog)) == 1, timeout_s=60)
        [spare] = spares(docker_engine, catalog)
        wait_until(
            lambda: answers_health(docker_engine.containers.get(spare)), timeout_s=60
        )  # as a launch seconds later

        second = envhub.running("template:count", backend="docker")
        container = docker_engine.containers.get(f"envhub-{second['id']}")
        assert container.id == spare, "the second launch runs in the spare"
        assert second["message"] == "running"
        with GenericEnvClient(base_url=second["url"]).sync() as client:
            client.reset(episode_id="spare")
            assert client.step({"add": 10}).done
            assert client.state()["episode_id"] == "spare"
        wait_until(lambda: spares(docker_engine, catalog) not in ([], [spare]), timeout_s=60)

        # Variables of its own: the launch cannot use a spare started without them.
        [next_spare] = spares(docker_engine, catalog)
        third = envhub.running("template:count", backend="docker", options={"env": {"COUNT_MODE": "x"}})
        own = docker_engine.containers.get(f"envhub-{third['id']}")
        assert own.id != next_spare
        assert "COUNT_MODE=x" in own.attrs["Config"]["Env"]
        assert spares(docker_engine, catalog) == [next_spare]

        assert envhub.http.delete(f"/api/endpoints/{second['id']}").json()["status"] == "stopped"
        assert second["id"] not in {c.name.removeprefix("envhub-") for c in docker_engine.containers.list(all=True)}
    finally:
        envhub.end_endpoints()
        envhub.stop()
    assert spares(docker_engine, catalog) == [], "envhub removes its spares when it stops"


def count_space_files(version: str) -> dict[str, str]:
    """A Docker Space of the count environment (its Dockerfile at the root), whose /probe says which code runs."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = write_count_env(Path(scratch) / "count")
        files = {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()}
    files["server/app.py"] += f"\n\n@app.get('/probe')\ndef probe():\n    return {{'version': '{version}'}}\n"
    return files


def probe(endpoint: dict[str, Any]) -> str:
    return str(httpx.get(f"{endpoint['url']}/probe", timeout=10).json()["version"])


@needs_docker
def test_a_hub_space_is_built_at_its_pinned_commit_and_keeps_that_image(
    hub: FakeHub, docker_engine: docker.DockerClient, docker_envhub: Envhub
) -> None:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    hub.add_space("alice/count", files=count_space_files("v1"))
    assert docker_envhub.http.post("/api/sync?wait=true", headers=admin).json()["status"] == "ok"
    first = docker_envhub.http.get("/api/environments/alice/count").json()["sha"]
    hub.update_space("alice/count", files=count_space_files("v2"))  # pushed: the registry's :latest would be v2
    assert docker_envhub.http.post("/api/sync?wait=true", headers=admin).json()["status"] == "ok"

    endpoint = docker_envhub.running(f"alice/count@{first[:7]}", backend="docker", options={"port": 8000})

    assert endpoint["revision"] == first and endpoint["latest"] != first
    assert probe(endpoint) == "v1"
    built = docker_engine.containers.get(f"envhub-{endpoint['id']}").image
    assert f"envhub-space/alice-count:{first[:12]}" in built.tags
    assert built.labels["envhub.revision"] == first
    assert endpoint["image_digest"] == built.id
    revisions = docker_envhub.http.get("/api/environments/alice/count/revisions").json()["data"]
    assert {r["revision"]: r["image_digest"] for r in revisions} == {first: built.id, endpoint["latest"]: None}

    # A replacement runs the image the endpoint started on, without asking the Hub for anything.
    asked = len(hub.requests)
    docker_engine.containers.get(f"envhub-{endpoint['id']}").kill()

    def replaced() -> bool:
        replicas = docker_envhub.endpoint(endpoint["id"])["pool"]["replicas"]
        return any(r["id"] != endpoint["id"] and r["status"] == "ready" for r in replicas)

    wait_until(replaced, timeout_s=60)
    (replacement,) = docker_envhub.ready_replicas(endpoint["id"])
    assert docker_engine.containers.get(f"envhub-{replacement['id']}").image.id == built.id
    assert probe(endpoint) == "v1"
    assert hub.requests[asked:] == []
    docker_envhub.http.delete(f"/api/endpoints/{endpoint['id']}")

    # An image named in the options runs as it is (the Hub's registry's, here standing in as a local tag), and
    # its replacements run it by id even after the tag moves on.
    built.tag(space_image("alice/count"))
    named = docker_envhub.running("alice/count", backend="docker", options={"image": space_image("alice/count")})
    assert named["image_digest"] == built.id
    docker_engine.images.get(BASE_IMAGE).tag(space_image("alice/count"))
    docker_engine.containers.get(f"envhub-{named['id']}").kill()
    wait_until(lambda: any(r["id"] != named["id"] for r in docker_envhub.ready_replicas(named["id"])), timeout_s=60)
    (again,) = docker_envhub.ready_replicas(named["id"])
    assert docker_engine.containers.get(f"envhub-{again['id']}").image.id == built.id
    docker_envhub.http.delete(f"/api/endpoints/{named['id']}")


@needs_docker
def test_a_space_without_a_dockerfile_is_refused_with_what_runs_it(hub: FakeHub, docker_envhub: Envhub) -> None:
    hub.add_space("alice/chat", files=space_files("Chat") | {"app.py": "import gradio\n"}, sdk="gradio")
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    assert docker_envhub.http.post("/api/sync?wait=true", headers=admin).json()["status"] == "ok"

    refused = docker_envhub.http.post("/api/endpoints", json={"environment": "alice/chat", "backend": "docker"})

    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert "has no Dockerfile to build (sdk gradio)" in detail and "space backend" in detail
    assert space_image("alice/chat") in detail


@needs_docker
def test_orphaned_containers_are_removed_at_start(
    settings: Settings, tmp_path: Path, templates_dir: Path, docker_engine: docker.DockerClient
) -> None:
    catalog = settings.catalog_id()
    labels = {LABEL: "orphan00", CATALOG_LABEL: catalog}
    elsewhere = {LABEL: "other00", CATALOG_LABEL: "another-catalog"}
    dead_spare = {SPARE_LABEL: "gonehost-1-abcdef", CATALOG_LABEL: catalog}  # of an instance that is gone

    def run(labels: dict[str, str], name: str | None = None) -> docker.models.containers.Container:
        return docker_engine.containers.run(BASE_IMAGE, ["sleep", "300"], detach=True, labels=labels, name=name)

    orphan, not_ours = run(labels), run(elsewhere)
    unclaimed = run(dead_spare, f"{SPARE_PREFIX}{tmp_path.name[-12:]}")
    claimed = run(dead_spare, "envhub-orphan01")  # a spare claimed by an endpoint no row knows
    try:
        envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data"}))
        envhub.stop()
        assert "orphan00" not in managed_containers(docker_engine)
        assert "other00" in managed_containers(docker_engine)  # another catalog's container is left alone
        remaining = {c.id for c in docker_engine.containers.list(all=True)}
        assert unclaimed.id not in remaining
        assert claimed.id not in remaining
    finally:
        for container in (orphan, not_ours, unclaimed, claimed):
            if container.id in {c.id for c in docker_engine.containers.list(all=True)}:
                container.remove(force=True)


def test_unreachable_docker_engine_is_a_clear_503(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, tmp_path: Path, templates_dir: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    write_count_env(templates_dir / "count")
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data"}))
    try:
        response = envhub.http.post("/api/endpoints", json={"environment": "template:count", "backend": "docker"})
    finally:
        envhub.stop()
    assert (response.status_code, response.json()["code"]) == (503, "backend_unavailable")


def test_docker_options_are_checked(envhub: Envhub) -> None:
    response = envhub.http.post(
        "/api/endpoints", json={"environment": "template:count", "backend": "docker", "options": {"gpus": 1}}
    )
    assert (response.status_code, response.json()["code"]) == (422, "invalid_request")
    # which options the backend takes: only the detail says so
    assert "['image', 'port', 'private', 'replicas'], not ['gpus']" in response.json()["detail"]


@needs_docker
def test_a_docker_pool_grows_into_the_spare_and_stops_whole(
    settings: Settings, tmp_path: Path, templates_dir: Path, docker_engine: docker.DockerClient
) -> None:
    write_count_env(templates_dir / "count")
    configured = settings.model_copy(
        update={"data_dir": tmp_path / "data", "docker_base_image": BASE_IMAGE, "docker_spares": 1}
    )
    envhub = Envhub(configured)
    try:
        endpoint = envhub.launch("template:count", backend="docker", options={"replicas": {"min": 1, "max": 2}})
        running = envhub.wait_status(endpoint["id"], "running", "failed", timeout_s=600)
        assert running["status"] == "running", running["message"]
        wait_until(lambda: spare_answers(docker_engine, configured.catalog_id()), timeout_s=60)
        with ExitStack() as sockets:
            for _ in range(2):  # the one replica looks full: the pool grows, into the container started ahead
                client = sockets.enter_context(GenericEnvClient(base_url=running["url"]).sync())
                client.reset()
            wait_until(lambda: len(envhub.ready_replicas(endpoint["id"])) == 2, timeout_s=30)
        second = docker_engine.containers.get(f"envhub-{endpoint['id']}-2")
        assert SPARE_LABEL in second.labels  # it was the spare
        envhub.http.delete(f"/api/endpoints/{endpoint['id']}")
        wait_until(lambda: not docker_engine.containers.list(all=True, filters={"name": f"envhub-{endpoint['id']}"}))
    finally:
        envhub.stop()
