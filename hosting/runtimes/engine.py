"""The Docker engine the docker and swarm backends talk to: its client, and the labels envhub puts on what it runs."""

import os
import socket

import docker
from docker.errors import DockerException

__all__ = ["CATALOG_LABEL", "LABEL", "engine_client"]

LABEL = "envhub.endpoint"
CATALOG_LABEL = "envhub.catalog"  # which catalog launched it: several envhubs may share one engine


def engine_client(host: str | None = None) -> docker.DockerClient:
    """The Docker engine at host (any DOCKER_HOST form), by default the one DOCKER_HOST names (or the local socket)."""
    address = host or os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if address.startswith("unix://"):
        # Asked first, because the SDK leaves its socket open when the engine refuses it.
        path = address.removeprefix("unix://")
        with socket.socket(socket.AF_UNIX) as probe:
            try:
                probe.connect(path)
            except OSError as exc:
                raise DockerException(f"no Docker engine answers at {path} ({exc.strerror or exc})") from None
    return docker.DockerClient(base_url=host) if host else docker.from_env()
