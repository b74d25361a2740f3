"""The official OpenEnv environments on the docker backend: the matrix of tests/test_corpus_process.py, each
environment built into an image. Their Dockerfiles build FROM OpenEnv's base image (snake's FROM python:3.11-slim),
which this engine does not have and cannot pull: envhub builds them with its own Dockerfile on BASE_IMAGE, and the
endpoint's status says so."""

from typing import Any

import pytest

from tests.conftest import needs
from tests.corpus import (
    LAUNCH_S,
    corpus,
    corpus_hub,
    needs_corpus,
    parametrize_names,
    test_envhubs_protocol_check_passes_core,
    test_envhubs_quality_suite_runs_every_check,
    test_openenv_validate_passes,
    test_sixteen_sessions_at_once_through_a_pool_of_one_to_eight,
)
from tests.swarm import BASE_IMAGE
from tests.test_containers import ENGINE

__all__ = [
    "corpus",
    "corpus_hub",
    "test_envhubs_protocol_check_passes_core",
    "test_envhubs_quality_suite_runs_every_check",
    "test_openenv_validate_passes",
    "test_sixteen_sessions_at_once_through_a_pool_of_one_to_eight",
]

BACKEND = "docker"
SETTINGS = {"docker_base_image": BASE_IMAGE}
pytestmark = [
    needs_corpus,
    needs("docker", ENGINE is not None, "no Docker engine (start one with shared/scripts/docker-engine.sh)"),
    pytest.mark.timeout(LAUNCH_S + 300),
]


# Chess's engine thinks for seconds a move: its checks and sessions take minutes, which the process backend's matrix
# spends already; here it is built, launched and validated like the others.
SLOW = {
    "test_envhubs_protocol_check_passes_core": ("chess_env",),
    "test_envhubs_quality_suite_runs_every_check": ("chess_env", "maze_env", "snake_env"),
    "test_sixteen_sessions_at_once_through_a_pool_of_one_to_eight": ("chess_env", "snake_env"),
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_names(metafunc, SLOW)


def test_the_status_says_envhub_built_the_image_and_why(corpus: dict[str, dict[str, Any]], name: str) -> None:
    message = corpus[name]["message"]
    assert message.startswith(f"running; built with envhub's Dockerfile on {BASE_IMAGE}"), message
    base = "python:3.11-slim" if name == "snake_env" else "ghcr.io/huggingface/openenv-base:latest"
    assert f"its own builds FROM {base}, which this Docker engine does not have and cannot pull" in message
