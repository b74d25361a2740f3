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
import secrets
import threading
from collections.abc import Callable
from pathlib import Path

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.models.containers import Container

from catalog.models import EnvironmentDetail
from core.errors import BackendUnavailableError, LaunchError
from hosting.models import Backend
from hosting.options import DockerOptions
from hosting.runtimes.base import Handle, Launched, LaunchSpec, Report, serve_when_healthy
from hosting.runtimes.engine import CATALOG_LABEL, LABEL, engine_client
from hosting.runtimes.images import Image, check_space_build, environment_image, image_options
from hosting.runtimes.logs import EXIT_NOTE, note_exit
from hosting.runtimes.snapshots import Snapshots
from hosting.runtimes.spares import SPARE_LABEL, SPARE_PREFIX, Spares

log = logging.getLogger(__name__)


class ContainerHandle(Handle):
    container: str
    image: str
    digest: str | None = None  # the id of the image the container runs: what a tag named when it started


def _server_of(container: Container) -> str | None:
    """The server (replica) a container of this catalog runs; None for a spare nobody has claimed."""
    if LABEL in container.labels:
        return str(container.labels[LABEL])
    if SPARE_LABEL in container.labels and not container.name.startswith(SPARE_PREFIX):
        return str(container.name).removeprefix("envhub-")
    return None


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
            raise LaunchError(
                f"image {image} is not available here ({exc.explanation})", code="image_unavailable"
            ) from exc
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
