"""The third-party corpus (the official OpenEnv environments beside the checkout) as the tests bring it: copied where
envhub may read it, launched on a backend, and driven through the gateway with clients we did not write (openenv's
GenericEnvClient, its CLI, its typed clients), with actions each environment's models.py takes."""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from openenv.core.generic_client import GenericEnvClient

from app.settings import REPO_ROOT, Settings
from conformance.quality import CHECKS as QUALITY
from hosting.runtimes.venvs import LAYER_FILE, envhub_site_packages
from tests.conftest import eventually, needs
from tests.serving import TEMPLATES, Envhub

CORPUS = REPO_ROOT.parent / "shared" / "thirdparty" / "openenv-envs"
NAMES = ("chess_env", "connect4_env", "maze_env", "snake_env")
needs_corpus = needs("the third-party corpus", CORPUS.is_dir(), f"it is not at {CORPUS}")
# A position with few pieces: chess's engine answers at once, where from the opening it searches for seconds.
ENDGAME = "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"
RESET: dict[str, dict[str, Any]] = {"chess_env": {"fen": ENDGAME}}
LAUNCH_S = 900  # a first launch installs what an environment needs (a virtualenv, or an image's layers)
POOL = {"min": 1, "max": 8}
QUALITY_CHECKS = [check.check_id for check in QUALITY]
OUT_OF_TIME = ("not finished: the report's deadline", "not run: the report's deadline")


def copy_corpus(folder: Path) -> Path:
    """The corpus copied into folder (shared/ is read-only), readable by the user process servers run as."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    for name in NAMES:
        shutil.copytree(CORPUS / name, folder / name)
    return folder


def corpus_envhub(scratch: Path, *, corpus: bool = True, **settings: Any) -> Envhub:
    """envhub with the built-in templates (and the corpus, copied into scratch), room for every pool the tests grow,
    and pools that keep their replicas while a module runs."""
    base = Settings(
        database_url=f"sqlite:///{scratch / 'envhub.db'}",
        data_dir=scratch / "data",
        templates_dir=TEMPLATES,
        extra_templates=str(copy_corpus(scratch / "corpus")) if corpus else "",
        hf_endpoint="http://127.0.0.1:9",
        sync_interval_s=0,
        health_interval_s=0,
        launch_timeout_s=LAUNCH_S,
        max_endpoints_per_owner=20,
        max_servers=96,
        max_servers_per_owner=96,
        pool_idle_s=3600,
        docker_spares=0,
        quality_deadline_s=30,  # chess's engine thinks for seconds a move: its report runs to the deadline
    )
    return Envhub(base.model_copy(update=settings))


def action_for(name: str, observation: dict[str, Any]) -> dict[str, Any]:
    """A move the environment takes in this position, as its models.py spells actions."""
    if name == "chess_env":
        return {"move": observation["legal_moves"][0]}  # ChessAction.move, in UCI
    if name in ("connect4_env", "maze_env"):
        key = "column" if name == "connect4_env" else "action"  # Connect4Action.column, MazeAction.action
        return {key: observation["legal_actions"][0]}
    return {"action": 0}  # SnakeAction.action: 0 goes on straight (1 and 2 turn)


def play(url: str, name: str, steps: int) -> int:
    """One session through openenv's GenericEnvClient: a reset, then `steps` valid actions (a new episode when one
    ends, as a trainer's loop does); how many steps it took."""
    taken = 0
    with GenericEnvClient(base_url=url, connect_timeout_s=30, message_timeout_s=120).sync() as env:
        result = env.reset(**RESET.get(name, {}))
        for _ in range(steps):
            if result.done:
                result = env.reset(**RESET.get(name, {}))
            result = env.step(action_for(name, result.observation))
            taken += 1
    return taken


def at_once(count: int, session: Callable[[], int]) -> list[int | BaseException]:
    """`count` sessions started together, each on its own thread; what each returned or raised."""

    def run() -> int | BaseException:
        try:
            return session()
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: run(), range(count)))


def sessions_of(envhub: Envhub, endpoint_id: str) -> int:
    count: int = envhub.endpoint(endpoint_id)["pool"]["sessions"]
    return count


def back_to_zero(envhub: Envhub, endpoint_id: str) -> None:
    """The pool holds no session within 2 s (of the last client leaving), and a new session is served at once."""
    eventually(lambda: sessions_of(envhub, endpoint_id), lambda n: n == 0, timeout_s=2, interval_s=0.05)
    endpoint = envhub.endpoint(endpoint_id)
    name = endpoint["environment"].removeprefix("template:")  # chess from its opening may think first, for seconds
    # Served, not queued (a queued session waits the pool's 60 s): a chess server may still be finishing the moves
    # of the sessions that just left, on a loaded machine for seconds, before it answers a reset.
    with GenericEnvClient(base_url=endpoint["url"], connect_timeout_s=5, message_timeout_s=30).sync() as env:
        assert env.reset(**RESET.get(name, {})).observation is not None


def launch_all(envhub: Envhub, names: tuple[str, ...], **body: Any) -> dict[str, dict[str, Any]]:
    """Each environment launched at once (their installs run side by side), once it runs, by name."""
    launched = {name: envhub.launch(f"template:{name}", **body) for name in names}
    running = {}
    for name, endpoint in launched.items():
        current = envhub.wait_status(endpoint["id"], "running", "failed", timeout_s=LAUNCH_S + 60)
        assert current["status"] == "running", f"{name}: {current['message']}"
        running[name] = current
    return running


def check(envhub: Envhub, endpoint_id: str, suite: str) -> dict[str, Any]:
    """envhub's own check of its endpoint (POST /api/checks), filed."""
    filed = envhub.http.post("/api/checks", json={"endpoint": endpoint_id, "suite": suite}, timeout=180)
    assert filed.status_code == 201, filed.text
    report: dict[str, Any] = filed.json()
    return report


def failing_core(report: dict[str, Any]) -> dict[str, str]:
    """The core (and 0.10) checks of a protocol report that failed or could not run, with why."""
    results = report["report"]["results"]
    return {r["check_id"]: r["evidence"] for r in results if r["check_id"] in report["report"]["failing"]}


def openenv_validate(url: str) -> tuple[int, dict[str, Any]]:
    """`openenv validate --url URL --json`, openenv's own CLI as its entry point runs it (in this process: importing
    the CLI costs seconds of CPU per interpreter); its exit code and JSON report."""
    from openenv.cli.__main__ import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["validate", "--url", url, "--json"])
    assert result.stdout.lstrip().startswith("{"), result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return result.exit_code, report


@contextmanager
def installed(packages: list[Path], scratch: Path) -> Iterator[Path]:
    """A throwaway virtualenv on envhub's packages (openenv, as pinned) with these environment packages pip-installed
    into it (without their server's dependencies: a client needs openenv only); its Python."""
    venv = scratch / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    layer = next((venv / "lib").glob("python*/site-packages"))
    (layer / LAYER_FILE).write_text("".join(f"{folder}\n" for folder in envhub_site_packages()))
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--no-deps", "--disable-pip-version-check", "--no-input", "-q"]
    done = subprocess.run([*pip, *map(str, packages)], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    yield python


def run_in(python: Path, script: str, scratch: Path, **arguments: Any) -> dict[str, Any]:
    """A script run by that Python, given `arguments` as JSON on its command line; the JSON it prints last."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env |= {"XDG_CACHE_HOME": str(scratch / "cache"), "HF_HUB_DISABLE_TELEMETRY": "1"}  # AutoEnv's discovery cache
    done = subprocess.run(
        [str(python), "-c", script, json.dumps(arguments)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=scratch,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- the matrix: one module per backend imports these (tests/test_corpus_process.py, tests/test_corpus_docker.py)


def parametrize_names(metafunc: pytest.Metafunc, slow: dict[str, tuple[str, ...]]) -> None:
    """Run a matrix test of the module on every corpus environment; those `slow` names for it (its longest cells,
    whose path the other environments walk too) only in `make test-all`."""
    if "name" in metafunc.fixturenames:
        heavy = slow.get(metafunc.definition.originalname, ())
        names = [pytest.param(n, marks=pytest.mark.slow) if n in heavy else n for n in NAMES]
        metafunc.parametrize("name", names)


@pytest.fixture(scope="module")
def corpus_hub(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    """One envhub for the module's backend (`BACKEND` in the module), its data folder shared by every launch, so that
    each environment's dependencies are installed once."""
    settings = getattr(request.module, "SETTINGS", {})
    envhub = corpus_envhub(tmp_path_factory.mktemp(f"corpus-{request.module.BACKEND}"), **settings)
    yield envhub
    envhub.end_endpoints()
    envhub.stop()


@pytest.fixture(scope="module")
def corpus(request: pytest.FixtureRequest, corpus_hub: Envhub) -> dict[str, dict[str, Any]]:
    """Every corpus environment launched on the module's backend, pooled {1, 8}, by name."""
    return launch_all(corpus_hub, NAMES, backend=request.module.BACKEND, options={"replicas": POOL})


def test_envhubs_protocol_check_passes_core(corpus_hub: Envhub, corpus: dict[str, dict[str, Any]], name: str) -> None:
    endpoint_id = corpus[name]["id"]
    report = check(corpus_hub, endpoint_id, "protocol")
    assert report["conforms"], failing_core(report)
    back_to_zero(corpus_hub, endpoint_id)


def test_envhubs_quality_suite_runs_every_check(
    corpus_hub: Envhub, corpus: dict[str, dict[str, Any]], name: str
) -> None:
    endpoint_id = corpus[name]["id"]
    report = check(corpus_hub, endpoint_id, "quality")
    # Whether the environment passes is its own affair (several do not echo the episode_id they are given), and so is
    # a check it is too slow to finish in the report's minute (chess's engine thinks for seconds a move); that every
    # check can run against it through envhub, its sessions served and kept, is envhub's.
    ran = [r["check_id"] for r in report["report"]["results"]]
    # The cross-host check applies to a pool of two replicas or more; the pool grows with the sessions it is asked.
    assert ran in (QUALITY_CHECKS, [c for c in QUALITY_CHECKS if c != "hub.cross_host_determinism"]), ran
    not_run = {r["check_id"]: r["evidence"] for r in report["report"]["results"] if r["status"] == "error"}
    assert all(e[0].startswith(OUT_OF_TIME) for e in not_run.values()), not_run
    back_to_zero(corpus_hub, endpoint_id)


def test_openenv_validate_passes(corpus: dict[str, dict[str, Any]], name: str) -> None:
    code, report = openenv_validate(corpus[name]["url"])
    failed = [c for c in report["criteria"] if not c["passed"]]
    assert code == 0 and report["passed"], failed


def test_sixteen_sessions_at_once_through_a_pool_of_one_to_eight(
    corpus_hub: Envhub, corpus: dict[str, dict[str, Any]], name: str
) -> None:
    # Each server holds one session (openenv's default): the pool queues what it cannot place, and grows.
    url = corpus[name]["url"]
    done = at_once(16, lambda: play(url, name, 10))
    assert done == [10] * 16, [repr(d) for d in done if d != 10]
    back_to_zero(corpus_hub, corpus[name]["id"])
