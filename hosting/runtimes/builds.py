"""How an environment's folder becomes an image: by its own Dockerfile, or by one envhub writes when that one
cannot build here.

The official OpenEnv environments build FROM ghcr.io/huggingface/openenv-base, which brings
openenv, uvicorn and uv (their Dockerfiles fetch uv from astral.sh when it is missing), and list
only their own extras; others build FROM an image this Docker engine may neither have nor be able
to pull. Such a folder is built with envhub's Dockerfile instead: on ENVHUB_DOCKER_BASE_IMAGE,
it pip-installs openenv and uvicorn (at envhub's versions, one layer every such image shares), then
the requirements the folder names (server/requirements.txt, requirements.txt or pyproject.toml)
and the Python packages its Dockerfile pip-installs, and serves the app the process backend
would serve (layouts.py) on the image's port. The system packages its Dockerfile installs are
left out. The launch says so, and why, in the endpoint's status.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import docker
from docker.errors import DockerException, ImageNotFound
from docker.utils import parse_repository_tag

from hosting.runtimes.dockerfiles import parse_dockerfile
from hosting.runtimes.layouts import Layout, template_layout
from hosting.runtimes.venvs import requirements_of
from hosting.runtimes.zygote import WS_MAX_SIZE

__all__ = ["OPENENV_BASE", "Build", "plan_build"]

OPENENV_BASE = "openenv-base"  # the name of OpenEnv's base image (ghcr.io/huggingface/openenv-base)
_SERVED = ("openenv", "uvicorn")  # what envhub's Dockerfile installs first, at envhub's own versions


@dataclass(frozen=True)
class Build:
    """How to build a folder: by its own Dockerfile (relative to it) and build arguments, or by the Dockerfile envhub
    wrote for it, and then the note the endpoint's status carries."""

    own: str | None
    build_args: dict[str, str]
    written: str = ""  # envhub's Dockerfile, when it builds with one
    note: str = ""  # why envhub wrote it, and what it does: "" for the folder's own


def plan_build(
    client: docker.DockerClient, folder: Path, own: str, base_image: str, port: int, names: Sequence[str]
) -> Build:
    """How to build the folder, whose Dockerfile is `own` (relative to it): by that one when its base images are
    here or can be pulled, else by envhub's on `base_image`. names: what the folder's root may be imported by."""
    text = (folder / own).read_text(errors="replace")
    declared = parse_dockerfile(text)
    # A Dockerfile written for OpenEnv's base builds on it, never on a plain Python image in its place: it needs
    # what that base brings. Others take envhub's base image for their BASE_IMAGE argument, as templates do.
    openenv_based = any(OPENENV_BASE in base for base in declared.bases)
    build_args = {} if openenv_based else {"BASE_IMAGE": base_image}
    for base in parse_dockerfile(text, build_args).bases:
        missing = _missing(client, base)
        if missing is None:
            continue
        layout = template_layout(folder, names)
        written = envhub_dockerfile(folder, layout, base_image, port, declared.python_packages)
        left_out = list(dict.fromkeys(declared.system_packages))
        without = f"; without the system packages its own installs ({', '.join(left_out[:5])})" if left_out else ""
        note = (
            f"built with envhub's Dockerfile on {base_image} (openenv, uvicorn and the requirements it names "
            f"pip-installed; serving {layout.app}{without}), since its own builds FROM {base}, which {missing}"
        )
        return Build(None, {}, written, note)
    return Build(own, build_args)


def _missing(client: docker.DockerClient, image: str) -> str | None:
    """Why the engine cannot have the image (it has it not, and cannot pull it); None when it can."""
    if image.lower() == "scratch" or "$" in image:
        return None  # scratch is no image; an argument without a value fails the build with Docker's own words
    try:
        client.images.get(image)
        return None
    except ImageNotFound:
        pass
    except DockerException as exc:
        return f"this Docker engine could not look up ({str(exc)[:200]})"
    repository, tag = parse_repository_tag(image)
    try:
        client.images.pull(repository, tag=tag or "latest")
    except DockerException as exc:
        reason = str(getattr(exc, "explanation", None) or exc).splitlines()[0][:200]
        return f"this Docker engine does not have and cannot pull ({reason})"
    return None


def envhub_dockerfile(folder: Path, layout: Layout, base_image: str, port: int, installs: Sequence[str]) -> str:
    """A Dockerfile that serves the folder's app on `port` as the process backend does: on `base_image`, with
    openenv and uvicorn at envhub's versions, then what the folder and its own Dockerfile install."""
    root = f"/app/{layout.package}" if layout.package else "/app/env"
    served = [f"{name}=={version(name)}" for name in _SERVED]
    wanted = list(dict.fromkeys([*requirements_of(folder / layout.requirements), *installs]))
    cwd = f"{root}/{layout.cwd}".rstrip("/")
    # The root's parent makes it importable by its package name, as the process backend's shim does.
    path = [cwd, *(f"{root}/{entry}".rstrip("/") for entry in layout.path), *(["/app"] if layout.package else [])]
    pip = ["python", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check"]
    # Inside its container the server listens on every interface: the engine publishes the port on loopback.
    serve = ["python", "-m", "uvicorn", layout.app, "--host", "0.0.0.0", "--port", str(port)]  # noqa: S104
    lines = [
        "# Written by envhub: the environment's own Dockerfile cannot build here (see hosting/runtimes/builds.py).",
        f"FROM {base_image}",
        "ENV PYTHONUNBUFFERED=1",
        f"RUN {json.dumps([*pip, *served])}",
        *([f"RUN {json.dumps([*pip, *wanted])}"] if wanted else []),
        f"COPY . {root}",
        f"WORKDIR {cwd}",
        f"ENV PYTHONPATH={':'.join(dict.fromkeys(path))}",
        f"EXPOSE {port}",
        f"CMD {json.dumps([*serve, '--ws-max-size', str(WS_MAX_SIZE)])}",
    ]
    return "\n".join(lines) + "\n"
