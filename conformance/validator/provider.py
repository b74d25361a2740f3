"""envhub's openenv ValidationProvider: a folder's image built as the docker backend builds it, run under the declared
resources, and always removed."""

import logging
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import httpx
from docker.errors import DockerException, NotFound
from docker.models.containers import Container
from openenv.validation.manifest import ExecutionDeclaration
from openenv.validation.providers import ExecResult, ProviderError, StartupError, UnsupportedCapability
from openenv.validation.runtime.contracts import LaunchSpec
from openenv.validation.types import ProviderCapability

from catalog.revisions import folder_hash
from core.errors import EnvhubError, LaunchError
from hosting.runtimes.images import build_image

__all__ = ["RUN_LABEL", "EnvhubValidationProvider", "ValidationSubject", "engine_provider"]

RUN_LABEL = "envhub.validation"  # on every container the provider starts: the validation run it belongs to
PORT = 8000  # openenv's validator reaches every subject on this port, as its own providers do
_MAX_LOG_BYTES = 65536
log = logging.getLogger(__name__)


class ValidationSubject:
    """A started subject: its container, reached on loopback; stop() removes it, once, whatever happened before."""

    def __init__(self, container: Container, base_url: str) -> None:
        self.container = container
        self.base_url = base_url
        self._stopped = False

    def inspect(self) -> dict[str, Any]:
        """The limits the container really runs under, without its environment, command or host paths."""
        self.container.reload()
        attrs = self.container.attrs
        host = attrs.get("HostConfig", {})
        state = attrs.get("State", {})
        limits = ("Memory", "MemorySwap", "NanoCpus", "PidsLimit", "ReadonlyRootfs", "CapDrop", "SecurityOpt", "Tmpfs")
        return {
            "container_id": attrs.get("Id"),
            "image_id": attrs.get("Image"),
            "running": state.get("Running", False),
            "oom_killed": state.get("OOMKilled", False),
            "limits": {key: host.get(key) for key in limits},
        }

    def logs(self, max_bytes: int = _MAX_LOG_BYTES) -> str:
        if not 0 < max_bytes <= _MAX_LOG_BYTES:
            raise ValueError(f"max_bytes must be from 1 to {_MAX_LOG_BYTES}")
        try:
            raw: bytes = self.container.logs(tail=1000)
        except DockerException as exc:
            raise ProviderError(f"could not read the subject's logs ({type(exc).__name__})") from exc
        return raw[-max_bytes:].decode("utf-8", "replace")

    def exec(self, argv: list[str], timeout_s: float) -> ExecResult:
        """Run argv in the container; coreutils' timeout kills it there at the deadline (exit 137), since the
        engine's exec has no deadline of its own."""
        if not argv or not argv[0] or any("\0" in arg for arg in argv):
            raise ValueError("exec needs a non-empty argument vector without NUL bytes")
        if self._stopped:
            raise ProviderError("the subject has stopped")
        started = time.monotonic()
        try:
            code, (out, err) = self.container.exec_run(["timeout", "-s", "KILL", f"{timeout_s:.3f}", *argv], demux=True)
        except DockerException as exc:
            raise ProviderError(f"exec in the subject failed ({type(exc).__name__})") from exc
        text = [(part or b"")[-_MAX_LOG_BYTES:].decode("utf-8", "replace") for part in (out, err)]
        return ExecResult(int(code), text[0], text[1], time.monotonic() - started)

    def stop(self) -> None:
        if self._stopped:
            return
        try:
            self.container.remove(force=True, v=True)
        except NotFound:
            pass  # gone already: removed is what stop promises
        except DockerException as exc:
            raise ProviderError(f"could not remove the validation container ({type(exc).__name__})") from exc
        self._stopped = True


class EnvhubValidationProvider:
    """Builds a folder by its own Dockerfile with BASE_IMAGE set (or by envhub's Dockerfile when its base cannot be
    had here), as a template's launch on the docker backend does, so nothing is pulled but the folder's own
    requirements. It enforces no network policy: it runs subjects on the bridge network (`public`), and the
    validator names the network check's skip."""

    name = "envhub-docker"
    capabilities = frozenset({ProviderCapability.IMAGE_BUILD, ProviderCapability.EXEC})
    supported_network_modes = frozenset({"public"})

    def __init__(self, client: docker.DockerClient, base_image: str) -> None:
        self.client = client
        self.base_image = base_image

    def build(self, root: Path, execution: ExecutionDeclaration) -> str:
        """The built image's id (sha256:...), tagged as a launch of the same folder tags it, so either reuses it."""
        folder = Path(root).resolve()
        if execution.context != "." or execution.dockerfile != "Dockerfile":
            raise UnsupportedCapability("envhub builds only the folder's own Dockerfile, with the folder as context")
        tag = f"envhub-template/{folder.name.lower()}:{folder_hash(folder)}"
        with tempfile.TemporaryDirectory(prefix="envhub-validation-") as scratch:
            try:
                image = build_image(self.client, folder, tag, self.base_image, Path(scratch) / "build.log", log.info)
                return str(self.client.images.get(image.tag).id)
            except LaunchError as exc:
                raise StartupError(f"image build failed: {exc}") from exc
            except DockerException as exc:
                raise ProviderError(f"the Docker engine failed the build ({type(exc).__name__})") from exc

    def start(self, spec: LaunchSpec) -> ValidationSubject:
        """The subject, answering /health with 200 within its startup deadline; its container is removed on every
        path that does not return it."""
        if spec.network.mode not in self.supported_network_modes:
            raise UnsupportedCapability(f"{self.name} does not enforce network mode {spec.network.mode}")
        if spec.resources.gpus:
            raise UnsupportedCapability(f"{self.name} has no GPUs")
        resources = spec.resources
        subject: ValidationSubject | None = None
        try:
            container = self.client.containers.run(
                spec.image_ref,
                detach=True,
                name=f"envhub-{spec.run_id}",
                labels={RUN_LABEL: spec.run_id},
                environment=dict(spec.env_vars),
                ports={f"{PORT}/tcp": ("127.0.0.1", None)},
                mem_limit=f"{resources.memory_mb}m",
                memswap_limit=f"{resources.memory_mb}m",
                nano_cpus=int(resources.cpu * 1e9),
                pids_limit=256,
                read_only=True,
                # The declared disk is the only writable space the subject has: a private tmpfs, not the host's /tmp.
                tmpfs={"/tmp": f"rw,nosuid,nodev,size={resources.disk_mb}m"},  # noqa: S108
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                init=True,
            )
            subject = ValidationSubject(container, "")
            subject.base_url = f"http://127.0.0.1:{_published_port(container)}"
            _wait_healthy(subject, time.monotonic() + spec.startup_timeout_s)
            return subject
        except BaseException as exc:
            self._remove(subject, spec.run_id)
            if isinstance(exc, DockerException):
                raise ProviderError(f"the Docker engine failed the start ({type(exc).__name__})") from exc
            raise

    def _remove(self, subject: ValidationSubject | None, run_id: str) -> None:
        """Remove the run's container: the subject's, or one the engine created before run() could return it."""
        if subject is not None:
            subject.stop()
            return
        for container in self.client.containers.list(all=True, filters={"label": f"{RUN_LABEL}={run_id}"}):
            ValidationSubject(container, "").stop()


def _published_port(container: Container) -> int:
    container.reload()
    bound = (container.attrs.get("NetworkSettings", {}).get("Ports") or {}).get(f"{PORT}/tcp")
    if not bound:
        raise StartupError(f"the engine published no loopback port for the subject's port {PORT}")
    return int(bound[0]["HostPort"])


def _wait_healthy(subject: ValidationSubject, deadline: float) -> None:
    """Poll /health until it answers 200; a container that exits fails at once, with the end of its logs."""
    with httpx.Client(trust_env=False, timeout=1.0) as client:
        while time.monotonic() < deadline:
            subject.container.reload()
            if subject.container.status in ("exited", "dead"):
                code = subject.container.attrs.get("State", {}).get("ExitCode")
                raise StartupError(f"the subject exited with code {code} at start: {subject.logs(2048)[-2048:]}")
            try:
                if client.get(subject.base_url + "/health").status_code == 200:
                    return
            except httpx.HTTPError:
                pass  # not listening yet
            time.sleep(0.2)
    raise StartupError("the subject did not answer /health with 200 before its startup deadline")


def engine_provider(client_of: Callable[[], docker.DockerClient], base_image: str) -> EnvhubValidationProvider | None:
    """envhub's provider on the Docker engine `client_of` reaches; None when no engine answers, and the validator's
    build-dependent checks are then its named skips."""
    try:
        return EnvhubValidationProvider(client_of(), base_image)
    except (DockerException, EnvhubError):
        return None
