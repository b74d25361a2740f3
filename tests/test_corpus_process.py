"""The official OpenEnv environments, as a user brings them, on the process backend: envhub's protocol check passes
core through the gateway, its quality suite runs, openenv's own CLI validates the URL, sixteen sessions at once
complete through a pool of one to eight servers that hold one each, and after each the pool is back at 0 sessions.
The same matrix runs on docker (tests/test_corpus_docker.py). Then the clients trainers bring: each environment's
own typed client, found by openenv's AutoEnv where its package is installed, and TRL's environment_factory pattern,
64 rollouts at once on a pool of one to sixteen."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.corpus import (
    LAUNCH_S,
    NAMES,
    back_to_zero,
    copy_corpus,
    corpus,
    corpus_hub,
    installed,
    launch_all,
    needs_corpus,
    parametrize_names,
    run_in,
    test_envhubs_protocol_check_passes_core,
    test_envhubs_quality_suite_runs_every_check,
    test_openenv_validate_passes,
    test_sixteen_sessions_at_once_through_a_pool_of_one_to_eight,
)
from tests.serving import Envhub

__all__ = [
    "corpus",
    "corpus_hub",
    "test_envhubs_protocol_check_passes_core",
    "test_envhubs_quality_suite_runs_every_check",
    "test_openenv_validate_passes",
    "test_sixteen_sessions_at_once_through_a_pool_of_one_to_eight",
]

BACKEND = "process"
pytestmark = [needs_corpus, pytest.mark.timeout(LAUNCH_S + 300)]

CLIENTS = Path(__file__).with_name("typed_clients.py").read_text()
TYPED = {
    "chess_env": ("chess_env.client.ChessEnv", "ChessAction", "ChessObservation"),
    "connect4_env": ("connect4_env.client.Connect4Env", "Connect4Action", "Connect4Observation"),
    "maze_env": ("maze_env.client.MazeEnv", "MazeAction", "MazeObservation"),
    "snake_env": ("snake_env.client.SnakeEnv", "SnakeAction", "SnakeObservation"),
}


# Chess's engine thinks for seconds a move: its protocol check and quality suite take minutes (its sixteen sessions
# at once stay in the default run).
SLOW = {
    "test_envhubs_protocol_check_passes_core": ("chess_env",),
    "test_envhubs_quality_suite_runs_every_check": ("chess_env", "connect4_env"),
    "test_sixteen_sessions_at_once_through_a_pool_of_one_to_eight": ("chess_env",),
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_names(metafunc, SLOW)


@pytest.fixture(scope="module")
def typed_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A throwaway virtualenv with every corpus environment's package installed (from a copy of its own)."""
    scratch = tmp_path_factory.mktemp("typed-clients")
    packages = copy_corpus(scratch / "packages")
    with installed([packages / name for name in NAMES], scratch) as python:
        yield python


def test_autoenv_finds_each_environment_and_its_typed_client_resets_and_steps(
    corpus: dict[str, dict[str, Any]], typed_python: Path, tmp_path: Path
) -> None:
    urls = {name: corpus[name]["url"] for name in NAMES}
    seen = run_in(typed_python, CLIENTS, tmp_path, mode="autoenv", urls=urls)
    assert {name: (s["client"], s["action"], s["observation"]) for name, s in seen.items()} == TYPED


def test_sixty_four_trl_rollouts_at_once_through_a_pool_of_one_to_sixteen(
    corpus_hub: Envhub, typed_python: Path, tmp_path: Path
) -> None:
    # GRPOTrainer makes one environment_factory instance per rollout of a generation batch: 64 here, on a pool
    # whose servers hold one session each, so that it grows to 16 and queues the rest.
    (endpoint,) = launch_all(corpus_hub, ("connect4_env",), options={"replicas": {"min": 1, "max": 16}}).values()
    done = run_in(
        typed_python, CLIENTS, tmp_path, mode="trl", name="connect4_env", url=endpoint["url"], rollouts=64, steps=5
    )
    failed = [r for r in done["rollouts"] if r["steps"] != 5]
    assert not failed and len(done["rollouts"]) == 64, failed[:3]
    back_to_zero(corpus_hub, endpoint["id"])
