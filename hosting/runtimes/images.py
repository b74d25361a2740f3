"""How an environment becomes the image the docker and swarm backends run: a template's folder or a Space's commit,
built by its own Dockerfile, or by one envhub writes when that one cannot build here.

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
import re
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TypeVar

import docker
from docker.errors import APIError, BuildError, DockerException, ImageNotFound
from docker.utils import parse_repository_tag

from catalog.models import EnvironmentDetail, Source
from catalog.revisions import folder_hash
from core.errors import InvalidInputError, LaunchError
from hosting.options import ImageOptions
from hosting.runtimes.base import Report
from hosting.runtimes.dockerfiles import parse_dockerfile
from hosting.runtimes.layouts import Layout, root_names, template_layout
from hosting.runtimes.snapshots import Snapshots
from hosting.runtimes.venvs import requirements_of
from hosting.runtimes.zygote import WS_MAX_SIZE

__all__ = [
    "BUILD_LABEL",
    "OPENENV_BASE",
    "Build",
    "BuildFailed",
    "Image",
    "build_image",
    "check_space_build",
    "environment_image",
    "image_options",
    "plan_build",
    "served_image",
    "space_image",
]

OPENENV_BASE = "openenv-base"  # the name of OpenEnv's base image (ghcr.io/huggingface/openenv-base)
_SERVED = ("openenv", "uvicorn")  # what envhub's Dockerfile installs first, at envhub's own versions
SERVED_REPOSITORY = "envhub-served"  # the images of openenv and uvicorn on a base image, which envhub's build on
_SERVED_LOCK = threading.Lock()  # one build of the shared image at a time: the others find it built
BUILD_FAILED = "build_failed"  # the code of a launch whose image could not be built


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
        "# Written by envhub: the environment's own Dockerfile cannot build here (see hosting/runtimes/images.py).",
        f"FROM {served}",
        *([f"RUN {json.dumps([*_PIP, *wanted])}"] if wanted else []),
        f"COPY . {root}",
        f"WORKDIR {cwd}",
        f"ENV PYTHONPATH={':'.join(dict.fromkeys(path))}",
        f"EXPOSE {port}",
        f"CMD {json.dumps([*serve, '--ws-max-size', str(WS_MAX_SIZE)])}",
    ]
    return "\n".join(lines) + "\n"


BUILD_LABEL = "envhub.build"  # on an image envhub built with its own Dockerfile: why, for later launches' status
ImageOptionsT = TypeVar("ImageOptionsT", bound=ImageOptions)


def _slug(space_id: str) -> str:
    return re.sub(r"[^a-z0-9]", "-", space_id.lower())


def space_image(space_id: str) -> str:
    """The image the Hub's registry holds for a Space: its latest build, whichever commit that was."""
    return f"registry.hf.space/{_slug(space_id)}:latest"


def _dockerfile(folder: Path) -> str | None:
    for candidate in ("Dockerfile", "server/Dockerfile"):
        if (folder / candidate).is_file():
            return candidate
    return None


def image_options(environment: EnvironmentDetail, options: ImageOptionsT) -> ImageOptionsT:
    """The options with the image (None: built from the folder's Dockerfile) and port an environment runs with."""
    image = options.image
    port = options.port or (environment.manifest or {}).get("port") or environment.app_port or 8000
    if not isinstance(port, int) or not 0 < port < 65536:
        raise InvalidInputError(f"the manifest's port must be the container's port number, got {port!r}")
    if image is None:
        if environment.path:
            folder = Path(environment.path)
            if _dockerfile(folder) is None:
                raise InvalidInputError(f"{environment.id} has no Dockerfile to build; use the process backend")
        elif environment.source != Source.HUB:
            raise InvalidInputError(f"{environment.id} has no folder or image to run; pass options.image")
    return options.model_copy(update={"image": image, "port": port})


def check_space_build(environment: EnvironmentDetail, snapshots: Snapshots | None, token: str | None) -> None:
    """Refuse a Hub Space whose image cannot be built here at its commit, saying what runs it instead."""
    at = f"{environment.id}@{(environment.sha or '')[:12]}"
    if snapshots is None or not environment.sha:
        raise InvalidInputError(
            f"{at} cannot be built here: this backend has no commit of it to build from; pass options.image "
            f"(e.g. {space_image(environment.id)}, the Hub's latest build) or use the process backend"
        )
    if not snapshots.files(environment.id, environment.sha, token).is_file("Dockerfile"):
        raise InvalidInputError(
            f"{at} has no Dockerfile to build (sdk {environment.sdk or 'unknown'}): launch it with the space "
            f"backend, or pass options.image (e.g. {space_image(environment.id)}, the Hub's latest build)"
        )


@dataclass(frozen=True)
class Image:
    """An image to run: its tag, and how envhub built it when it did otherwise than the environment's Dockerfile
    says (for the endpoint's status)."""

    tag: str
    note: str = ""


def environment_image(
    client: docker.DockerClient,
    environment: EnvironmentDetail,
    snapshots: Snapshots | None,
    token: str | None,
    base_image: str,
    log_path: Path,
    report: Report,
    port: int,
) -> Image:
    """The image an environment with no image of its own runs: built from a template's folder, or from a Hub Space's
    repo at its commit, unless built before; its server listens on `port`."""
    names = root_names(environment)
    if environment.path:
        folder = Path(environment.path)
        tag = f"envhub-template/{folder.name.lower()}:{folder_hash(folder)}"
        return build_image(client, folder, tag, base_image, log_path, report, port=port, names=names)
    if snapshots is None or not environment.sha:
        raise LaunchError(f"{environment.id} has no commit to build from here")
    tag = f"envhub-space/{_slug(environment.id)}:{environment.sha[:12]}"
    built = _built(client, tag)
    if built is not None:
        return built
    folder = snapshots.fetch(environment.id, environment.sha, token, report)
    return build_image(
        client, folder, tag, base_image, log_path, report, revision=environment.sha, port=port, names=names
    )


def _built(client: docker.DockerClient, tag: str) -> Image | None:
    """The image of that tag, built before (with the note its build left on it), or None."""
    try:
        found = client.images.get(tag)
    except ImageNotFound:
        return None
    return Image(tag, str((found.labels or {}).get(BUILD_LABEL, "")))


def build_image(
    client: docker.DockerClient,
    folder: Path,
    tag: str,
    base_image: str,
    log_path: Path,
    report: Report,
    *,
    revision: str | None = None,
    port: int = 8000,
    names: Sequence[str] = (),
) -> Image:
    """The image of that tag, built from the folder unless one of that tag exists (its name says what it holds: a
    folder's content hash, a Space's commit): by its own Dockerfile, or by envhub's when that one cannot build here
    (builds.py)."""
    built = _built(client, tag)
    if built is not None:
        return built
    own = _dockerfile(folder)
    if own is None:
        raise LaunchError(f"{folder.name} has no Dockerfile to build")
    plan = plan_build(client, folder, own, base_image, port, names or [folder.name])
    name = tag.split(":")[0].split("/")[-1]
    if plan.note:
        report(f"building image {tag} (first launch only): {plan.note}")
    else:
        report(f"building image {tag} from {name}/{own} (first launch only)")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    labels = {"envhub.revision": revision} if revision else {"envhub.template": folder.name}
    labels |= {BUILD_LABEL: plan.note} if plan.note else {}
    with tempfile.TemporaryDirectory(prefix="envhub-build-") as scratch:
        dockerfile = plan.own
        if dockerfile is None:  # envhub's, from outside the folder: the engine is sent it beside the folder's files
            try:
                served_image(client, plan.served, base_image, report)
            except BuildFailed as exc:
                raise LaunchError(str(exc), code=BUILD_FAILED) from exc
            written = Path(scratch) / "Dockerfile"
            written.write_text(plan.written)
            dockerfile = str(written)
            with log_path.open("a") as log:
                log.write(f"envhub: {plan.note}\n{plan.written}")
        try:
            _, output = client.images.build(
                path=str(folder), dockerfile=dockerfile, tag=tag, buildargs=plan.build_args, rm=True, labels=labels
            )
        except BuildError as exc:
            lines = [str(chunk.get("stream") or chunk.get("error") or "") for chunk in exc.build_log]
            with log_path.open("a") as log:
                log.write("".join(lines))
            tail = " ".join(line.strip() for line in lines if line.strip())[-600:]
            raise LaunchError(f"building image {tag} failed: {exc.msg}; {tail}", code=BUILD_FAILED) from exc
        except APIError as exc:
            raise LaunchError(f"building image {tag} failed: {exc.explanation}", code=BUILD_FAILED) from exc
    with log_path.open("a") as log:
        log.write("".join(str(chunk.get("stream", "")) for chunk in output))
    return Image(tag, plan.note)
