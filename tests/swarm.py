"""The local Docker engine as a swarm manager, probed once, for the swarm backend's tests."""

import os

import docker
from docker.errors import DockerException

from hosting.runtimes.engine import engine_client
from tests.conftest import needs

__all__ = ["BASE_IMAGE", "MANAGER", "needs_swarm"]

BASE_IMAGE = os.environ.get("BASE_IMAGE", "envhub/python-base:3.11")


def _manager() -> docker.DockerClient | None:
    """The local engine, when it is a swarm manager."""
    try:
        client = engine_client()
        swarm = client.info().get("Swarm") or {}
    except DockerException:
        return None
    if swarm.get("LocalNodeState") == "active" and swarm.get("ControlAvailable"):
        return client
    client.close()
    return None


MANAGER = _manager()
needs_swarm = needs(
    "swarm", MANAGER is not None, "the Docker engine is not a swarm manager (docker swarm init, as .ci/run does)"
)
