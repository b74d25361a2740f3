"""The docker backend: an environment as a container, built from its folder or a Hub Space's repo at its commit.

A Hub Space's image is built from its Dockerfile as the Space's repo stands at the endpoint's
pinned commit (downloaded as the process backend downloads it), tagged with that commit: what
the Hub's registry holds under `:latest` is whatever the owner pushed last, so it says nothing
about a revision. An image named in the options (that registry's, say) runs as it is.

Containers carry labels saying which catalog (several envhubs may share one engine) and
which endpoint they serve; spare containers, started ahead of launches (spares.py), say
which instance started them, and once claimed are known by their name.
"""

import logging
import os
import re
import secrets
import socket
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import docker
import requests
from docker.errors import APIError, BuildError, DockerException, ImageNotFound, NotFound
from docker.models.containers import Container

from catalog.models import EnvironmentDetail, Source
from catalog.revisions import folder_hash
from core.errors import BackendUnavailableError, InvalidInputError, LaunchError
from hosting.models import Backend
from hosting.options import DockerOptions, ImageOptions
from hosting.runtimes import ContainerHandle, Launched, LaunchSpec, Report, serve_when_healthy
from hosting.runtimes.builds import BuildFailed, plan_build, served_image
from hosting.runtimes.layouts import root_names
from hosting.runtimes.logs import EXIT_NOTE, note_exit
from hosting.runtimes.snapshots import Snapshots
from hosting.runtimes.spares import SPARE_LABEL, SPARE_PREFIX, Spares

LABEL = "envhub.endpoint"
BUILD_LABEL = "envhub.build"  # on an image envhub built with its own Dockerfile: why, for later launches' status
CATALOG_LABEL = "envhub.catalog"  # which catalog launched it: several envhubs may share one engine

log = logging.getLogger(__name__)
ImageOptionsT = TypeVar("ImageOptionsT", bound=ImageOptions)


def _slug(space_id: str) -> str:
    return re.sub(r"[^a-z0-9]", "-", space_id.lower())


def space_image(space_id: str) -> str:
    """The image the Hub's registry holds for a Space: its latest build, whichever commit that was."""
    return f"registry.hf.space/{_slug(space_id)}:latest"


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


def _server_of(container: Container) -> str | None:
    """The server (replica) a container of this catalog runs; None for a spare nobody has claimed."""
    if LABEL in container.labels:
        return str(container.labels[LABEL])
    if SPARE_LABEL in container.labels and not container.name.startswith(SPARE_PREFIX):
        return str(container.name).removeprefix("envhub-")
    return None


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
                raise LaunchError(str(exc)) from exc
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
            raise LaunchError(f"building image {tag} failed: {exc.msg}; {tail}") from exc
        except APIError as exc:
            raise LaunchError(f"building image {tag} failed: {exc.explanation}") from exc
    with log_path.open("a") as log:
        log.write("".join(str(chunk.get("stream", "")) for chunk in output))
    return Image(tag, plan.note)


class ContainerRuntime:
    name = Backend.DOCKER
    handle_type = ContainerHandle

    def __init__(
        self,
        client_factory: Callable[[], docker.DockerClient] = engine_client,
        *,
        base_image: str = "python:3.11-slim",
        memory: str = "2g",
        cpus: float = 1.0,
        pids: int = 512,
        ready_timeout_s: float = 60,
        catalog: str = "default",
        instance: str = "",
        spares: int = 0,
        snapshots: Snapshots | None = None,
    ) -> None:
        """snapshots: where Hub Spaces are downloaded at their commits to build from (None: Spaces run only from
        an image named in the options)."""
        self._client_factory = client_factory
        self.snapshots = snapshots
        self.catalog = catalog
        self.instance = instance
        self.spares = Spares(spares, self._run_spare, self._remove)
        self._client: docker.DockerClient | None = None
        self.base_image = base_image
        self.memory = memory
        self.cpus = cpus
        self.pids = pids
        self.ready_timeout_s = ready_timeout_s
        self._lock = threading.Lock()

    @property
    def client(self) -> docker.DockerClient:
        with self._lock:
            if self._client is None:
                try:
                    self._client = self._client_factory()
                except DockerException as exc:
                    raise BackendUnavailableError(
                        f"the docker backend cannot reach a Docker engine ({exc}); "
                        "start Docker or use the process backend"
                    ) from exc
            return self._client

    def check(self, environment: EnvironmentDetail, options: DockerOptions, token: str | None = None) -> DockerOptions:
        completed = image_options(environment, options)
        self.client.ping()
        if completed.image is None and not environment.path:
            check_space_build(environment, self.snapshots, token)
        return completed

    def start(self, spec: LaunchSpec[DockerOptions], report: Report) -> Launched[ContainerHandle]:
        port = spec.options.port or 8000
        built = Image(spec.options.image) if spec.options.image else None
        built = built or environment_image(
            self.client, spec.environment, self.snapshots, spec.token, self.base_image, spec.log_path, report, port
        )
        image = built.tag
        key = self._spare_key(spec.environment.id, image, port) if self.spares.keep and not spec.env else None
        spare = self.spares.claim(key, f"envhub-{spec.server_id}") if key else None
        if spare is not None:
            report(f"claimed a container of {image} started ahead")
            container, url = spare
        else:
            report(f"starting a container of {image}")
            container, url = self._run(
                image,
                port,
                spec.env,
                spec.environment.id,
                name=f"envhub-{spec.server_id}",
                labels={LABEL: spec.server_id},
            )
        digest = str(container.attrs.get("Image") or "") or None
        handle = ContainerHandle(server=spec.server_id, container=container.id, image=image, digest=digest)
        self._follow_logs(container, spec.log_path)
        launched = serve_when_healthy(
            self,
            Launched(url, handle, built.note),
            timeout_s=self.ready_timeout_s,
            what=f"the container of {spec.environment.id}",
            log_path=spec.log_path,
            started=spec.on_started,
        )
        if key:  # the next launch of this image finds a spare
            self.spares.start_ahead(key, image, port, spec.environment.id)
        return launched

    def _run(
        self, image: str, port: int, env: dict[str, str], environment: str, *, name: str, labels: dict[str, str]
    ) -> tuple[Container, str]:
        """Run a container of the image with the limits from settings; it and the loopback URL of its port."""
        try:
            container: Container = self.client.containers.run(
                image,
                detach=True,
                name=name,
                ports={f"{port}/tcp": ("127.0.0.1", None)},
                environment=env,
                labels={CATALOG_LABEL: self.catalog, "envhub.environment": environment, **labels},
                mem_limit=self.memory,
                nano_cpus=int(self.cpus * 1e9),
                pids_limit=self.pids,
                init=True,
            )
            container.reload()
            host_port = container.ports[f"{port}/tcp"][0]["HostPort"]
        except ImageNotFound as exc:
            raise LaunchError(f"image {image} is not available here ({exc.explanation})") from exc
        except (APIError, KeyError, IndexError, TypeError) as exc:
            raise LaunchError(f"docker could not start {image}: {exc}") from exc
        return container, f"http://127.0.0.1:{host_port}"

    def _spare_key(self, environment: str, image: str, port: int) -> str | None:
        """What a spare must match: the environment, its image as it is now (a newer pull under the same tag is
        another image) and the port."""
        try:
            return f"{environment} {self.client.images.get(image).id}:{port}"
        except DockerException:
            return None  # not in the engine yet: the run pulls it or says why it cannot

    def _run_spare(self, image: str, port: int, environment: str) -> tuple[Container, str]:
        name = SPARE_PREFIX + secrets.token_hex(5)
        return self._run(image, port, {}, environment, name=name, labels={SPARE_LABEL: self.instance})

    def sweep(self, live_instances: set[str]) -> None:
        """Remove the unclaimed spares of instances that are gone (this catalog's only)."""
        for container in self._ours(SPARE_LABEL):
            if container.name.startswith(SPARE_PREFIX) and container.labels[SPARE_LABEL] not in live_instances:
                self._remove(container)

    def _follow_logs(self, container: Container, log_path: Path) -> None:
        def copy() -> None:
            try:
                with log_path.open("ab") as log:
                    for chunk in container.logs(stream=True, follow=True):
                        log.write(chunk)
                        log.flush()
                container.reload()
            except (DockerException, requests.RequestException, OSError):
                return  # the container went away; its log ends here
            state = container.attrs.get("State") or {}
            if state.get("OOMKilled"):
                with log_path.open("a", encoding="utf-8") as log:
                    log.write(f"{EXIT_NOTE}was killed for going over its memory limit ({self.memory})\n")
            elif isinstance(state.get("ExitCode"), int) and state.get("Status") == "exited":
                code = state["ExitCode"]
                note_exit(str(log_path), 128 - code if code > 128 else code)  # 128+n: killed by signal n

        threading.Thread(target=copy, name=f"logs-{container.short_id}", daemon=True).start()

    def _container(self, handle: ContainerHandle) -> Container | None:
        try:
            container: Container = self.client.containers.get(handle.container)
        except NotFound:
            return None
        return container

    def stop(self, handle: ContainerHandle) -> None:
        container = self._container(handle)
        if container is not None:
            self._remove(container)

    def stop_leftover(self, server_id: str) -> None:
        for container in self._ours():
            if _server_of(container) == server_id:
                self._remove(container)

    @staticmethod
    def _remove(container: Container) -> None:
        try:
            container.stop(timeout=5)
            container.remove(force=True)
        except NotFound:
            pass  # already gone
        except APIError as exc:
            if exc.status_code != 409:  # 409: a removal is already under way
                raise

    def _ours(self, *labels: str) -> list[Container]:
        filters = {"label": [f"{CATALOG_LABEL}={self.catalog}", *labels]}
        containers: list[Container] = self.client.containers.list(all=True, filters=filters, ignore_removed=True)
        return containers

    def auth_headers(self, handle: ContainerHandle) -> dict[str, str]:
        return {}

    def is_running(self, handle: ContainerHandle) -> bool:
        try:
            container = self._container(handle)
        except (DockerException, requests.RequestException):
            return False
        return container is not None and container.status == "running"

    def close(self) -> None:
        """Remove this instance's spares, then let go of the engine."""
        self.spares.close()
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def managed_servers(self) -> set[str]:
        return {endpoint for c in self._ours() if (endpoint := _server_of(c)) is not None}
