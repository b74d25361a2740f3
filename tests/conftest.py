"""Shared fixtures: a fake Hub on loopback, a database per test (a SQLite file, and in tests
marked `databases` a Postgres schema too), and the app built on them."""

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest
from fastapi.testclient import TestClient
from huggingface_hub import constants
from sqlalchemy import Engine
from sqlmodel import Session

from app.main import create_app
from app.settings import Preload, Settings
from catalog.models import EnvironmentDetail, QualitySummary, Source, Verdict
from catalog.store import note_quality
from core.db import create_db_engine, init_db
from evals.harnesses import HARNESSES, Installed, install, installed
from hosting.options import ProcessOptions
from hosting.runtimes.base import LaunchSpec
from hosting.runtimes.process import ProcessRuntime
from tests.environments import write_count_env
from tests.fakehub import FakeHub
from tests.fakemodel import FakeModel, generic_brain
from tests.postgres import postgres_schema as schema_of_its_own
from tests.trainer_venv import build as build_trainer_venv
from tests.trainer_venv import ready, venv_dir

if TYPE_CHECKING:
    import docker

    from tests.serving import Envhub
    from tests.signin import Browsers

ADMIN_TOKEN = "test-admin-token"
# The templates the protocol checks and quality reports are run on, served once per test module.
CHECKED_TEMPLATES = ("toolbox", "arithmetic_tasks", "connect_four", "wordle", "maze", "lights_out")
T = TypeVar("T")


def needs(what: str, available: bool, reason: str) -> pytest.MarkDecorator:
    """Skip on a bare machine, but never in CI, where every service must be there."""
    return pytest.mark.skipif(not available and os.environ.get("CI") != "true", reason=f"{what}: {reason}")


# A Postgres URL whose role may create schemas, e.g. postgresql+psycopg://envhub:envhub@localhost/envhub
POSTGRES_URL = os.environ.get("ENVHUB_TEST_POSTGRES_URL", "")
# No background quality reports in the envhubs tests start (in process, or as subprocesses inheriting this):
# they would compete with the tests for the machine. The test of those rounds turns them on in its settings.
os.environ["ENVHUB_QUALITY_INTERVAL_S"] = "0"
# The trainer's own virtualenv (TRL and torch): skipped on a laptop until built, built here in CI if not yet.
needs_trainer = needs("trl", ready(venv_dir()), "build the trainer's virtualenv: python3 tests/trainer_venv.py")
# The agent-harness CLIs (npm): skipped on a laptop until installed, installed here in CI if .ci/run has not.
HARNESS_DIR = Settings().harness_dir
on_postgres = needs("postgres", bool(POSTGRES_URL), "set ENVHUB_TEST_POSTGRES_URL to run on Postgres (see .ci/run)")


def needs_harness(name: str) -> pytest.MarkDecorator:
    available = installed(HARNESSES[name], HARNESS_DIR)
    return needs(name, available, f"install it: python -m app harnesses install {name}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked `databases` run once on SQLite and once on Postgres; those marked `databases("postgres")` (the
    slow ones, where the database is a detail) once, on Postgres when there is one, else on SQLite."""
    marker = metafunc.definition.get_closest_marker("databases")
    if marker is None or "database_url" not in metafunc.fixturenames:
        return
    if marker.args == ("postgres",):
        dialects: list[object] = ["postgres" if POSTGRES_URL else "sqlite"]
    else:
        dialects = ["sqlite", pytest.param("postgres", marks=on_postgres)]
    metafunc.parametrize("database_url", dialects, indirect=True)


@contextmanager
def postgres_schema() -> Iterator[str]:
    """A URL of a new, empty schema in the Postgres database of ENVHUB_TEST_POSTGRES_URL, dropped after."""
    if not POSTGRES_URL:
        pytest.fail("ENVHUB_TEST_POSTGRES_URL is not set: CI must run the tests on Postgres too")
    with schema_of_its_own(POSTGRES_URL, "test") as url:
        yield url


@pytest.fixture(scope="session")
def trainer_python() -> Path:
    """The python of the trainer's virtualenv, which has trl, transformers and a CPU torch."""
    return build_trainer_venv()


@pytest.fixture(scope="session")
def harness_cli() -> Callable[[str], Installed]:
    """harness_cli(name): that harness CLI, installed (the test is marked needs_harness(name))."""
    return lambda name: install(HARNESSES[name], HARNESS_DIR)


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The test's own empty database: a SQLite file, or a Postgres schema when parametrized so."""
    if getattr(request, "param", "sqlite") == "sqlite":
        yield f"sqlite:///{tmp_path / 'data' / 'envhub.db'}"
        return
    with postgres_schema() as url:
        yield url


@pytest.fixture(autouse=True)
def _hf_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    # Both are read when huggingface_hub is imported, so the variables alone come too late.
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub() as fake:
        yield fake


@pytest.fixture
def templates_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "templates"
    folder.mkdir()
    return folder


@pytest.fixture
def settings(database_url: str, hub: FakeHub, templates_dir: Path) -> Settings:
    return settings_for(database_url, hub, templates_dir)


def settings_for(database_url: str, hub: FakeHub, templates_dir: Path) -> Settings:
    """The settings a test's envhub starts from (a module's shared envhub too): no sync, no background checks."""
    return Settings(
        database_url=database_url,
        hf_endpoint=hub.url,
        hf_token=None,
        admin_token=ADMIN_TOKEN,
        sync_interval_s=0,
        health_interval_s=0,
        templates_dir=templates_dir,
        extra_templates="",
        hub_timeout_s=10,  # tests that need a timeout set a short one themselves
        hub_max_retries=2,
        hub_backoff_s=0.01,
        process_preload=Preload.LAUNCH,  # a zygote only in the tests that launch
        docker_spares=0,  # spare containers only in the tests about them
        validator_interval_s=0,  # validator rounds only in the tests about them
    )


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    """The test's catalog, created empty."""
    engine = create_db_engine(settings.database_url)
    init_db(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings.model_copy(update={"ui": False}))) as test_client:
        yield test_client


def readme(front_matter: str, body: str = "# An environment\n\nIt does things.\n") -> str:
    return f"---\n{front_matter.strip()}\n---\n{body}"


def space_files(title: str, *, tags: str = "[openenv]", body: str = "", extra: str = "") -> dict[str, str]:
    """README.md and openenv.yaml of a typical environment Space."""
    name = title.lower().replace(" ", "_")
    card = f"title: {title}\nemoji: 🎲\nsdk: docker\napp_port: 8000\nbase_path: /web\ntags: {tags}\n{extra}"
    return {
        "README.md": readme(card, body or f"# {title}\n\n{title} is an OpenEnv environment.\n"),
        "openenv.yaml": f"spec_version: 1\nname: {name}\ntype: space\nruntime: fastapi\n"
        "app: server.app:app\nport: 8000\n",
    }


def eventually(get: Callable[[], T], ok: Callable[[T], bool], timeout_s: float = 30, interval_s: float = 0.2) -> T:
    """Poll get() until ok() holds for what it returns, and return that; fail the test, saying what was last seen,
    if it does not within the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = get()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"not met within {timeout_s} s; last seen: {value!r}")
        time.sleep(interval_s)


def wait_until(condition: Callable[[], bool], timeout_s: float = 10, interval_s: float = 0.05) -> None:
    """Poll until the condition holds; fail the test if it does not within the deadline."""
    eventually(condition, bool, timeout_s, interval_s)


@pytest.fixture
def count_template(templates_dir: Path) -> str:
    """A small counting environment among the templates (see tests/environments.py)."""
    write_count_env(templates_dir / "count")
    return "template:count"


@pytest.fixture
def envhub(settings: Settings, tmp_path: Path, count_template: str) -> "Iterator[Envhub]":
    """envhub served on loopback, with the count template."""
    from tests.serving import Envhub

    server = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data"}))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def template_urls() -> Iterator[dict[str, str]]:
    """The CHECKED_TEMPLATES launched by envhub, by name; the URLs are its gateway URLs."""
    from tests.serving import serve_templates

    with serve_templates(*CHECKED_TEMPLATES) as urls:
        yield urls


@pytest.fixture
def swarm() -> "docker.DockerClient":
    """The local engine, a swarm manager with the base image (never skipped in CI: see tests.swarm.needs_swarm)."""
    from docker.errors import DockerException

    from tests.swarm import BASE_IMAGE, MANAGER

    if MANAGER is None:
        pytest.fail("the Docker engine is not a swarm manager: CI runs `docker swarm init` in .ci/run")
    try:
        MANAGER.images.get(BASE_IMAGE)
    except DockerException:
        pytest.fail(f"base image {BASE_IMAGE} is missing: run shared/scripts/docker-engine.sh")
    return MANAGER


@pytest.fixture
def browsers() -> "Iterator[Browsers]":
    """Cookie-keeping HTTP clients that sign in through the fake Hub (tests/signin.py)."""
    from tests.signin import Browsers

    opened = Browsers()
    yield opened
    opened.close()


@pytest.fixture
def space_app(tmp_path: Path) -> Iterator[str]:
    """The count environment's server, standing in for what the Hub runs at the Space's host."""
    folder = write_count_env(tmp_path / "space-app" / "count")
    runtime = ProcessRuntime(tmp_path / "space-runtime")
    environment = EnvironmentDetail(id="alice/count", source=Source.HUB, title="Count", path=str(folder))
    spec = LaunchSpec("spaceapp", environment, tmp_path / "space-app.log", ProcessOptions())
    launched = runtime.start(spec, lambda _: None)
    yield launched.url
    runtime.stop(launched.handle)


@pytest.fixture
def model() -> Iterator[FakeModel]:
    """A fake OpenAI-compatible model server that always answers with a valid move."""
    fake = FakeModel(generic_brain)
    yield fake
    fake.close()


def file_summary(envhub: "Envhub", environment_id: str, verdict: Verdict, failing: list[str]) -> None:
    """A quality summary on the environment's row, as a report filed elsewhere would leave it."""
    summary = QualitySummary(
        verdict=verdict, passed=7 - len(failing), failed=len(failing), skipped=0, errors=0, failing=failing,
        checked_at=datetime.now(UTC),
    )  # fmt: skip
    engine = create_db_engine(envhub.settings.database_url)
    try:
        with Session(engine) as session, session.begin():
            note_quality(session, environment_id, summary)
    finally:
        engine.dispose()
