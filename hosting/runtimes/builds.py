"""How an environment's folder becomes an image: by its own Dockerfile, or by one envhub writes when that one
cannot build here.

The official OpenEnv environments build FROM ghcr.io/huggingface/openenv-base, which brings
openenv, uvicorn and uv (their Dockerfiles fetch uv from astral.sh when it is missing), and list
only their own extras; others build FROM an image this Docker engine may neither have nor be able
to pull. Such a folder is built with envhub's Dockerfile instead: on an image of openenv and uvicorn
(at envhub's versions) on ENVHUB_DOCKER_BASE_IMAGE, built once and shared by every such image
(`served_image`: launches side by side wait for the one build rather than each installing it), then
the requirements the folder names (server/requirements.txt, requirements.txt or pyproject.toml)
and the Python packages its Dockerfile pip-installs, and serves the app the process backend
would serve (layouts.py) on the image's port. The system packages its Dockerfile installs are
left out. The launch says so, and why, in the endpoint's status.
"""

import hashlib
import io
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import docker
from docker.errors import APIError, BuildError, DockerException, ImageNotFound
from docker.utils import parse_repository_tag

from hosting.runtimes.dockerfiles import parse_dockerfile
from hosting.runtimes.layouts import Layout, template_layout
from hosting.runtimes.venvs import requirements_of
from hosting.runtimes.zygote import WS_MAX_SIZE

__all__ = ["OPENENV_BASE", "Build", "BuildFailed", "plan_build", "served_image"]

OPENENV_BASE = "openenv-base"  # the name of OpenEnv's base image (ghcr.io/huggingface/openenv-base)
_SERVED = ("openenv", "uvicorn")  # what envhub's Dockerfile installs first, at envhub's own versions
SERVED_REPOSITORY = "envhub-served"  # the images of openenv and uvicorn on a base image, which envhub's build on
_SERVED_LOCK = threading.Lock()  # one build of the shared image at a time: the others find it built


class BuildFailed(Exception):
    """The engine could not build an image; the message says why, with the end of its output."""


@dataclass(frozen=True)
class Build:
    """How to build a folder: by its own Dockerfile (relative to it) and build arguments, or by the Dockerfile envhub
    wrote for it, and then the note the endpoint's status carries."""

    own: str | None
    build_args: dict[str, str]
    written: str = ""  # envhub's Dockerfile, when it builds with one
    served: str = ""  # the tag of the shared image envhub's Dockerfile builds FROM (served_image builds it)
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
        served = served_tag(client, base_image)
        written = envhub_dockerfile(folder, layout, served, port, declared.python_packages)
        left_out = list(dict.fromkeys(declared.system_packages))
        without = f"; without the system packages its own installs ({', '.join(left_out[:5])})" if left_out else ""
        note = (
            f"built with envhub's Dockerfile on {base_image} (openenv, uvicorn and the requirements it names "
            f"pip-installed; serving {layout.app}{without}), since its own builds FROM {base}, which {missing}"
        )
        return Build(None, {}, written=written, note=note, served=served)
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


def _served() -> list[str]:
    return [f"{name}=={version(name)}" for name in _SERVED]


_PIP = ["python", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check"]


def served_tag(client: docker.DockerClient, base_image: str) -> str:
    """The tag of the shared image of openenv and uvicorn on `base_image`: it names the base image's id (or, when
    the engine has it not yet, its name) and the versions, so a new base or a new envhub gets an image of its own."""
    try:
        base = str(client.images.get(base_image).id)
    except DockerException:
        base = base_image
    digest = hashlib.sha256("\n".join([base, *_served()]).encode()).hexdigest()[:16]
    return f"{SERVED_REPOSITORY}:{digest}"


def served_image(client: docker.DockerClient, tag: str, base_image: str, say: Callable[[str], None]) -> None:
    """Build the shared image of that tag (served_tag) on `base_image`, unless it was built before."""
    with _SERVED_LOCK:
        try:
            client.images.get(tag)
            return
        except ImageNotFound:
            pass
        say(f"building {tag}: openenv and uvicorn on {base_image}, once for every environment built on it")
        dockerfile = "\n".join(
            [f"FROM {base_image}", "ENV PYTHONUNBUFFERED=1", f"RUN {json.dumps([*_PIP, *_served()])}"]
        )
        try:
            client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
        except BuildError as exc:
            lines = [str(chunk.get("stream") or chunk.get("error") or "") for chunk in exc.build_log]
            tail = " ".join(line.strip() for line in lines if line.strip())[-600:]
            raise BuildFailed(f"building {tag} failed: {exc.msg}; {tail}") from exc
        except APIError as exc:
            raise BuildFailed(f"building {tag} failed: {exc.explanation}") from exc


def envhub_dockerfile(folder: Path, layout: Layout, served: str, port: int, installs: Sequence[str]) -> str:
    """A Dockerfile that serves the folder's app on `port` as the process backend does: on the shared image
    `served` (openenv and uvicorn at envhub's versions), then what the folder and its own Dockerfile install."""
    root = f"/app/{layout.package}" if layout.package else "/app/env"
    wanted = list(dict.fromkeys([*requirements_of(folder / layout.requirements), *installs]))
    cwd = f"{root}/{layout.cwd}".rstrip("/")
    # The root's parent makes it importable by its package name, as the process backend's shim does.
    path = [cwd, *(f"{root}/{entry}".rstrip("/") for entry in layout.path), *(["/app"] if layout.package else [])]
    # Inside its container the server listens on every interface: the engine publishes the port on loopback.
    serve = ["python", "-m", "uvicorn", layout.app, "--host", "0.0.0.0", "--port", str(port)]  # noqa: S104
    lines = [
        "# Written by envhub: the environment's own Dockerfile cannot build here (see hosting/runtimes/builds.py).",
        f"FROM {served}",
        *([f"RUN {json.dumps([*_PIP, *wanted])}"] if wanted else []),
        f"COPY . {root}",
        f"WORKDIR {cwd}",
        f"ENV PYTHONPATH={':'.join(dict.fromkeys(path))}",
        f"EXPOSE {port}",
        f"CMD {json.dumps([*serve, '--ws-max-size', str(WS_MAX_SIZE)])}",
    ]
    return "\n".join(lines) + "\n"
