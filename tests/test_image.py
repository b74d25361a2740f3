"""envhub's own Dockerfile, as a Docker Space builds and runs it: on a real engine, with no Hub in reach."""

import time
from collections.abc import Iterator

import docker
import httpx
import pytest
from docker.errors import DockerException
from docker.models.containers import Container

from app.settings import REPO_ROOT
from app.usecases.deploy import APP_PATHS
from catalog.templates import find_template_folders
from tests.conftest import wait_until
from tests.test_containers import BASE_IMAGE, ENGINE, needs_docker

IMAGE = "envhub/app:test"
# What a Space sets, and a Hub that does not answer: the app must start and serve anyway.
SPACE_ENV = {
    "SYSTEM": "spaces",
    "SPACE_ID": "alice/envhub",
    "SPACE_HOST": "alice-envhub.hf.space",
    "SPACE_AUTHOR_NAME": "alice",
    "SPACE_REPO_NAME": "envhub",
    "HF_ENDPOINT": "http://127.0.0.1:9",
    "ENVHUB_ALLOW_PRIVATE_URLS": "false",
}


@pytest.fixture(scope="module")
def image() -> str:
    assert ENGINE is not None
    try:
        ENGINE.images.get(BASE_IMAGE)
    except DockerException:
        pytest.fail(f"base image {BASE_IMAGE} is missing: run shared/scripts/docker-engine.sh")
    # The requirements layer comes before the code, so after the first build only the code layers are rebuilt.
    ENGINE.images.build(
        path=str(REPO_ROOT), tag=IMAGE, buildargs={"BASE_IMAGE": BASE_IMAGE}, rm=True, forcerm=True, timeout=900
    )
    return IMAGE


@pytest.fixture
def container(image: str) -> Iterator[Container]:
    assert ENGINE is not None
    running = ENGINE.containers.run(
        image, detach=True, environment=SPACE_ENV, ports={"7860/tcp": ("127.0.0.1", None)}, mem_limit="2g"
    )
    try:
        yield running
    finally:
        running.remove(force=True)


def published_url(container: Container) -> str:
    container.reload()
    binding = container.ports["7860/tcp"][0]
    return f"http://127.0.0.1:{binding['HostPort']}"


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/health", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@needs_docker
@pytest.mark.timeout(1200)
def test_the_image_builds_and_serves_offline_like_a_space(container: Container) -> None:
    started = time.monotonic()
    url = published_url(container)
    wait_until(lambda: healthy(url), timeout_s=120)

    health = httpx.get(f"{url}/api/health").json()
    assert health["status"] == "ok"
    assert health["environments"] == len(find_template_folders([REPO_ROOT / "spaces_templates"]))
    page = httpx.get(f"{url}/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "<!doctype html>" in page.text.lower()
    behind_proxy = httpx.get(
        f"{url}/config", headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "alice-envhub.hf.space"}
    )
    assert behind_proxy.json()["root"].startswith("https://alice-envhub.hf.space")

    # The Space runs as uid 1000 and holds only the app, nothing of the developer's tree.
    assert container.exec_run("id -u").output.decode().strip() == "1000"
    listing = set(container.exec_run("ls -A /home/user/app").output.decode().split())
    assert listing == {name for name in APP_PATHS if name not in ("Dockerfile", ".dockerignore")} | {"data"}
    logs = container.logs().decode()
    assert "Traceback" not in logs, logs
    print(f"container healthy {time.monotonic() - started:.1f} s after start")


def test_the_build_context_is_only_the_app() -> None:
    ignored = [line for line in (REPO_ROOT / ".dockerignore").read_text().splitlines() if not line.startswith("#")]
    included = docker.utils.exclude_paths(str(REPO_ROOT), ignored)
    assert {
        "app/__main__.py",
        "gateway/relay.py",
        "catalog/models.py",
        "evals/runs.py",
        "spaces_templates/maze/openenv.yaml",
        "requirements.txt",
    } <= included
    assert not any(p.startswith(("tests/", "data/", ".git/", ".venv/", "bench/")) for p in included)
    assert not any("__pycache__" in p for p in included)
