"""Hub Spaces run by the process backend: downloaded at their pinned commit from a fake Hub, in each layout
seen in real Spaces, refused when they need Docker, and started without any of envhub's secrets."""

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient

from catalog.models import EnvironmentDetail, Source
from core.errors import InvalidInputError, LaunchError
from hosting.options import ProcessOptions
from hosting.runtimes.base import Launched, LaunchSpec
from hosting.runtimes.dockerfiles import parse_dockerfile, python_of
from hosting.runtimes.process import ProcessHandle, ProcessRuntime
from hosting.runtimes.snapshots import KEPT_COMMITS, Snapshots
from tests.conftest import ADMIN_TOKEN
from tests.environments import write_count_env
from tests.fakehub import FakeHub
from tests.serving import Envhub

TOKEN = "hf_test"  # alice's, on the fake Hub
# A route the test Spaces add to the count environment's app: which code runs, and what it sees.
PROBE = """
VERSION = "{version}"


@app.get("/probe")
def probe():
    return {{"version": VERSION, "environ": dict(os.environ)}}
"""
# The count environment under code/, as a Dockerfile with its own WORKDIR and PYTHONPATH serves it.
DOCKERFILE = """FROM python:3.11-slim
WORKDIR /srv
COPY code/ /srv/code/
RUN pip install --no-cache-dir -r /srv/code/requirements.txt
ENV PYTHONPATH=/srv/code:$PYTHONPATH
WORKDIR /srv/code
CMD python -m uvicorn server.app:app --host 0.0.0.0 --port 7860
"""
LAYOUTS = ("manifest", "package", "envs", "dockerfile")


def count_space(layout: str, *, version: str = "v1") -> dict[str, str]:
    """The count environment's files, laid out as a Space of this layout does."""
    written = {"manifest": "plain", "package": "by_name", "envs": "relative", "dockerfile": "plain"}[layout]
    with tempfile.TemporaryDirectory() as scratch:
        folder = write_count_env(Path(scratch) / "count", layout=written)
        files = {path.relative_to(folder).as_posix(): path.read_text() for path in folder.rglob("*") if path.is_file()}
    files["server/app.py"] += PROBE.format(version=version)
    readme = files["README.md"]
    if layout == "manifest":  # openenv.yaml names an app that no other layout would find
        files["main.py"] = files.pop("server/app.py")
        files["openenv.yaml"] = "spec_version: 1\nname: count\napp: main:app\nport: 8000\n"
    elif layout == "envs":
        files = {f"src/envs/count_env/{path}": text for path, text in files.items()} | {"README.md": readme}
    elif layout == "dockerfile":
        files = {f"code/{path}": text for path, text in files.items() if path != "openenv.yaml"}
        files |= {"README.md": readme, "Dockerfile": DOCKERFILE}
    return files


@pytest.fixture(scope="module")
def space_hub() -> Iterator[FakeHub]:
    with FakeHub() as hub:
        yield hub


@pytest.fixture(scope="module")
def runtime(space_hub: FakeHub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessRuntime]:
    """One runtime for the module, forking its servers from one zygote."""
    runtime = ProcessRuntime(tmp_path_factory.mktemp("runtime"), preload=True, hub_endpoint=space_hub.url)
    runtime.warm()
    yield runtime
    runtime.close()


def space(
    hub: FakeHub, space_id: str, files: dict[str, str], *, sdk: str = "docker", private: bool = False
) -> EnvironmentDetail:
    """The Space on the fake Hub, and its catalog entry as a sync writes it."""
    hub.add_space(space_id, files=files, sdk=sdk, private=private)
    return environment_at(hub, space_id)


def environment_at(hub: FakeHub, space_id: str) -> EnvironmentDetail:
    """The Space's catalog entry at its current commit."""
    current = httpx.get(f"{hub.url}/api/spaces/{space_id}").json()
    return EnvironmentDetail(id=space_id, source=Source.HUB, title="Count", sdk=current["sdk"], sha=current["sha"])


def launch(
    runtime: ProcessRuntime,
    environment: EnvironmentDetail,
    log_dir: Path,
    *,
    token: str | None = None,
    env: dict[str, str] | None = None,
    said: list[str] | None = None,
) -> Launched[ProcessHandle]:
    """Check and start the Space as envhub's launch does."""
    options = runtime.check(environment, ProcessOptions(), token)
    server_id = environment.id.replace("/", "-") + f"-{len(list(log_dir.glob('*.log')))}"
    spec = LaunchSpec(server_id, environment, log_dir / f"{server_id}.log", options, env=env or {}, token=token)
    return runtime.start(spec, (said if said is not None else []).append)


def probe(launched: Launched[ProcessHandle]) -> dict[str, object]:
    body: dict[str, object] = httpx.get(f"{launched.url}/probe", timeout=10).json()
    return body


def play(url: str) -> None:
    with GenericEnvClient(base_url=url).sync() as client:
        assert client.reset().observation["total"] == 0
        assert client.step({"add": 4}).done is False
        result = client.step({"add": 6})
        assert (result.done, result.reward, result.observation["total"]) == (True, 1.0, 10)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_layout_runs_and_plays(layout: str, space_hub: FakeHub, runtime: ProcessRuntime, tmp_path: Path) -> None:
    environment = space(space_hub, f"alice/count-{layout}", count_space(layout))
    said: list[str] = []

    launched = launch(runtime, environment, tmp_path, said=said)
    try:
        play(launched.url)
        assert probe(launched)["version"] == "v1"
    finally:
        runtime.stop(launched.handle)
    files = len(count_space(layout))
    assert said[0].startswith(f"downloading alice/count-{layout}@{(environment.sha or '')[:12]}: {files} files, 0.0 MB")
    assert said[-1].startswith("starting ")


# BuildKit's heredoc form, as Spaces written for `docker build` since Dockerfile 1.4 use it.
HEREDOC_DOCKERFILE = """# syntax=docker/dockerfile:1
FROM python:3.11-slim
RUN <<EOF
set -eux
apt-get update
apt-get install -y --no-install-recommends \\
    libsndfile1 libgl1-mesa-glx
rm -rf /var/lib/apt/lists/*
EOF
COPY . /app
WORKDIR /app
CMD ["uvicorn", "count.server.app:app", "--host", "0.0.0.0", "--port", "7860"]
"""
README = "---\ntitle: Refused\nsdk: docker\ntags: [openenv]\n---\nNot for the process backend.\n"


@pytest.mark.parametrize(
    ("files", "sdk", "code", "refusal"),
    [
        (
            {"Dockerfile": "FROM python:3.11\nRUN apt-get update && apt-get install -y libosmesa6-dev\n"},
            "docker",
            "needs_docker_backend",
            "its Dockerfile installs system packages (libosmesa6-dev)",
        ),
        (
            {"Dockerfile": "FROM python:3.11-slim\nRUN\tapt-get update && apt-get install -y libosmesa6-dev\n"},
            "docker",
            "needs_docker_backend",
            "its Dockerfile installs system packages (libosmesa6-dev)",
        ),
        (
            {"Dockerfile": HEREDOC_DOCKERFILE},
            "docker",
            "needs_docker_backend",
            "its Dockerfile installs system packages (libsndfile1, libgl1-mesa-glx)",
        ),
        (
            {"Dockerfile": "FROM node:20-slim\nCMD node server.js\n"},
            "docker",
            "needs_docker_backend",
            "builds FROM node:20-slim, not a Python",
        ),
        (
            {"Dockerfile": "FROM python:3.11\nCMD python serve.py\n"},
            "docker",
            "needs_docker_backend",
            "it has no OpenEnv app to serve",
        ),
        ({"app.py": "import gradio\n"}, "gradio", "not_a_docker_space", "is a gradio Space"),
    ],
    ids=["apt-get", "tab-separated", "heredoc", "node", "no-app", "gradio"],
)
def test_spaces_that_need_docker_are_refused_before_anything_starts(
    files: dict[str, str],
    sdk: str,
    code: str,
    refusal: str,
    space_hub: FakeHub,
    runtime: ProcessRuntime,
    request: pytest.FixtureRequest,
) -> None:
    space_id = f"alice/refused-{request.node.callspec.id}"
    # Only the Space without an app lacks the count environment: the others are refused for what else they need.
    base = (
        {"README.md": README, "serve.py": "print('hello')\n"} if "no OpenEnv app" in refusal else count_space("package")
    )
    environment = space(space_hub, space_id, base | files, sdk=sdk)

    with pytest.raises(InvalidInputError) as refused:
        runtime.check(environment, ProcessOptions())

    assert refused.value.code == code
    assert refusal in refused.value.message  # what in its files needs a container: only the message names it
    assert runtime.snapshots.find(space_id, environment.sha or "") is None  # nothing was downloaded


def test_the_python_packages_a_dockerfile_installs_are_read_from_its_run_lines() -> None:
    dockerfile = parse_dockerfile(
        "FROM python:3.11-slim\nARG CORE=0.2.1\n"
        "RUN pip install --no-cache-dir -r requirements.txt && pip install -U 'openenv-core==${CORE}' 'numpy<2' -e .\n"
        "RUN python -m pip install --index-url https://pypi.example/simple fastapi uvicorn[standard] ./wheels/x.whl\n"
        "RUN uv pip install --system gymnasium && apt-get install -y git\n"
    )
    assert dockerfile.python_packages == ["openenv-core==0.2.1", "numpy<2", "fastapi", "uvicorn[standard]", "gymnasium"]
    # Its Python, to say so when it is not envhub's.
    assert python_of(dockerfile) == "3.11"
    assert python_of(parse_dockerfile("FROM docker.io/library/python:3.12-slim AS base\nFROM base\n")) == "3.12"
    assert python_of(parse_dockerfile("FROM ghcr.io/meta-pytorch/openenv-base:latest\n")) is None


def test_the_packages_a_dockerfile_installs_are_installed_for_its_server(
    space_hub: FakeHub, runtime: ProcessRuntime, tmp_path: Path
) -> None:
    files = count_space("dockerfile")
    files["Dockerfile"] = (
        files["Dockerfile"]
        .replace("python:3.11-slim", "python:3.9-slim")  # never envhub's (3.11 or newer)
        .replace(
            "ENV PYTHONPATH", "RUN pip install --no-cache-dir envhub-no-such-package-anywhere==1.0\nENV PYTHONPATH"
        )
    )
    environment = space(space_hub, "alice/count-pip", files)
    said: list[str] = []

    with pytest.raises(LaunchError) as failed:
        launch(runtime, environment, tmp_path, said=said)

    ours = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert f"its Dockerfile builds on Python 3.9; it runs here on envhub's Python {ours}" in said
    assert any(line.startswith("installing 1 requirements (envhub-no-such-package-anywhere==1.0)") for line in said)
    assert failed.value.code == "requirements_failed"
    assert "No matching distribution found for envhub-no-such-package-anywhere==1.0" in failed.value.message  # pip's


def test_downloads_keep_the_last_commits_and_those_servers_run_from(space_hub: FakeHub, tmp_path: Path) -> None:
    snapshots = Snapshots(tmp_path / "spaces", space_hub.url, None)
    space_hub.add_space("alice/pushy", files={"README.md": README, "v.txt": "0"})
    commits = [environment_at(space_hub, "alice/pushy").sha or ""]
    for version in range(1, KEPT_COMMITS + 2):
        space_hub.update_space("alice/pushy", files={"v.txt": str(version)})
        commits.append(environment_at(space_hub, "alice/pushy").sha or "")

    snapshots.hold("a-server", snapshots.fetch("alice/pushy", commits[0], None, print))
    for sha in commits[1:]:
        snapshots.fetch("alice/pushy", sha, None, print)

    kept = sorted(p.name for p in (tmp_path / "spaces" / "alice" / "pushy").iterdir())
    assert kept == sorted([commits[0], *commits[-KEPT_COMMITS:]])  # commits[1] went
    snapshots.release("a-server")
    space_hub.update_space("alice/pushy", files={"v.txt": "new"})
    snapshots.fetch("alice/pushy", environment_at(space_hub, "alice/pushy").sha or "", None, print)
    assert snapshots.find("alice/pushy", commits[0]) is None


def test_a_space_not_synced_yet_is_refused_with_what_to_do(runtime: ProcessRuntime) -> None:
    environment = EnvironmentDetail(id="alice/new", source=Source.HUB, title="New", sdk="docker")
    with pytest.raises(InvalidInputError) as refused:
        runtime.check(environment, ProcessOptions())
    assert refused.value.code == "not_synced"


def test_a_private_space_downloads_with_the_users_token(
    space_hub: FakeHub, runtime: ProcessRuntime, tmp_path: Path
) -> None:
    environment = space(space_hub, "alice/private-count", count_space("package"), private=True)

    with pytest.raises(InvalidInputError) as refused:
        runtime.check(environment, ProcessOptions())
    assert refused.value.code == "hub_token_required"

    space_hub.clear_requests()
    launched = launch(runtime, environment, tmp_path, token=TOKEN)
    try:
        play(launched.url)
    finally:
        runtime.stop(launched.handle)
    reads = [r for r in space_hub.requests if "alice/private-count" in r.path]
    assert reads and {r.user for r in reads} == {"alice"}
    # The token is nowhere envhub writes: not in the snapshot, the log or the handle.
    written = [p for p in (runtime.work_dir / "spaces").rglob("*") if p.is_file()] + list(tmp_path.glob("*.log"))
    assert written and not [p for p in written if TOKEN.encode() in p.read_bytes()]
    assert TOKEN not in launched.handle.model_dump_json()


@pytest.mark.slow  # a commit's own code: also test_a_pinned_space_launched_through_the_api_keeps_serving_its_revision
def test_an_older_commit_still_serves_its_own_code(space_hub: FakeHub, runtime: ProcessRuntime, tmp_path: Path) -> None:
    old = space(space_hub, "alice/count-history", count_space("package", version="v1"))
    space_hub.update_space("alice/count-history", files=count_space("package", version="v2"))
    new = environment_at(space_hub, "alice/count-history")
    assert new.sha != old.sha

    for environment, version in ((old, "v1"), (new, "v2")):
        launched = launch(runtime, environment, tmp_path)
        try:
            assert probe(launched)["version"] == version
        finally:
            runtime.stop(launched.handle)


@pytest.mark.parametrize(
    "launch_env",
    [
        pytest.param({"COUNT_START": "1"}, id="forked"),
        # PYTHONHASHSEED is read as Python starts: no zygote can fork that server; one started anew sees the same
        pytest.param({"COUNT_START": "1", "PYTHONHASHSEED": "0"}, id="from-scratch", marks=pytest.mark.slow),
    ],
)
def test_the_server_sees_none_of_envhubs_secrets(
    launch_env: dict[str, str],
    space_hub: FakeHub,
    runtime: ProcessRuntime,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secrets = {"HF_TOKEN": "hf_envhubs_own", "ENVHUB_ADMIN_TOKEN": "admin-secret", "ENVHUB_SESSION_SECRET": "s"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    environment = space(space_hub, f"alice/probe-{len(launch_env)}", count_space("manifest"), private=True)

    launched = launch(runtime, environment, tmp_path, token=TOKEN, env=launch_env)
    try:
        seen = probe(launched)["environ"]
    finally:
        runtime.stop(launched.handle)

    assert isinstance(seen, dict)
    assert {name: seen.get(name) for name in launch_env} == launch_env  # what the launch passes, and only that
    assert [name for name in seen if name.startswith(("HF_", "ENVHUB_"))] == ["ENVHUB_ENDPOINT"]
    assert not {TOKEN, *secrets.values()} & set(seen.values())


def test_a_second_launch_of_a_commit_downloads_nothing(
    space_hub: FakeHub, runtime: ProcessRuntime, tmp_path: Path
) -> None:
    environment = space(space_hub, "alice/count-again", count_space("envs"))
    runtime.stop(launch(runtime, environment, tmp_path).handle)
    space_hub.clear_requests()

    said: list[str] = []
    launched = launch(runtime, environment, tmp_path, said=said)
    try:
        play(launched.url)
    finally:
        runtime.stop(launched.handle)
    assert [r.path for r in space_hub.requests] == []
    assert not [line for line in said if line.startswith("downloading")]


def test_a_pinned_space_launched_through_the_api_keeps_serving_its_revision(hub: FakeHub, envhub: Envhub) -> None:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    hub.add_space("alice/count", files=count_space("package", version="v1"))
    synced = envhub.http.post("/api/sync?wait=true", headers=admin)
    assert synced.json()["status"] == "ok", synced.text
    first = envhub.http.get("/api/environments/alice/count").json()["sha"]

    endpoint = envhub.running("alice/count", backend="process")
    assert endpoint["url"] == f"{envhub.url}/endpoints/{endpoint['id']}"
    assert (endpoint["revision"], endpoint["latest"]) == (first, None)
    play(endpoint["url"])

    # The owner pushes; the next sync sees it. The endpoint says so, and its URL keeps serving what it launched.
    hub.update_space("alice/count", files=count_space("package", version="v2"))
    assert envhub.http.post("/api/sync?wait=true", headers=admin).json()["status"] == "ok"
    second = envhub.http.get("/api/environments/alice/count").json()["sha"]
    assert second != first
    again = envhub.endpoint(endpoint["id"])
    assert (again["revision"], again["latest"]) == (first, second)
    assert httpx.get(f"{endpoint['url']}/probe", timeout=10).json()["version"] == "v1"

    # A pinned id launches the old commit after the push; the plain id the new one.
    pinned = envhub.running(f"alice/count@{first[:7]}", backend="process")
    newest = envhub.running("alice/count", backend="process")
    assert (pinned["revision"], newest["revision"]) == (first, second)
    assert httpx.get(f"{pinned['url']}/probe", timeout=10).json()["version"] == "v1"
    assert httpx.get(f"{newest['url']}/probe", timeout=10).json()["version"] == "v2"
