"""The space backend: an environment as a Hugging Face Space in a namespace of the user's choosing.

A template folder becomes a new Docker Space (create_repo + upload_folder); a Hub
environment is duplicated. A signed-in user's launch uses their own Hub token (sealed in
the handle for stopping later); otherwise the server's HF_TOKEN. The endpoint runs once
the Hub reports the Space RUNNING and its /health answers; stopping pauses the Space, or
deletes it when asked (hosting.replicas stops it only once no other live replica, of another endpoint
launched with the same namespace and name, uses it). The token never reaches the Space's own server: a
public Space is sent no credential, a private one a short-lived JWT for it alone (catalog.space_access).
"""

import logging
import re
import time
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError
from pydantic import Field

from catalog.models import EnvironmentDetail, Source
from catalog.space_access import SpaceKeys
from core.errors import EnvhubError, InvalidInputError, LaunchError
from core.sealing import Sealer
from hosting.models import Backend
from hosting.options import SpaceOptions
from hosting.runtimes.base import Handle, Launched, LaunchSpec, Report, wait_healthy

log = logging.getLogger(__name__)

_RUNNING = {"RUNNING", "RUNNING_BUILDING", "RUNNING_APP_STARTING", "SLEEPING"}
_FAILED = {"BUILD_ERROR", "RUNTIME_ERROR", "CONFIG_ERROR", "NO_APP_FILE", "DELETING", "STOPPED", "PAUSED"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_IGNORED = ["__pycache__/*", "*.pyc", ".venv/*", ".git/*"]


class SpaceHandle(Handle):
    space: str
    delete_on_stop: bool = False
    token: str | None = Field(default=None, repr=False)  # the owner's Hub token, sealed: to pause or delete it
    private: bool = False  # reached with a Space JWT; a public Space is sent no credential

    def shared(self) -> str | None:
        return self.space  # endpoints launched with one namespace and name are served by one Space


def _hub_message(exc: HfHubHTTPError) -> str:
    status = exc.response.status_code if exc.response is not None else "?"
    server = (exc.server_message or "").strip().splitlines()
    return f"HTTP {status}" + (f": {server[0][:200]}" if server else "")


class SpaceRuntime:
    name = Backend.SPACE
    handle_type = SpaceHandle

    def __init__(
        self,
        endpoint: str,
        token: str | None,
        *,
        sealer: Sealer | None = None,
        poll_s: float = 5,
        build_timeout_s: float = 1800,
    ) -> None:
        self.endpoint = endpoint
        self.token = token  # the server's own, for launches by nobody in particular
        self.sealer = sealer
        self.poll_s = poll_s
        self.build_timeout_s = build_timeout_s
        self.keys = SpaceKeys(endpoint)

    def _api(self, token: str | None = None) -> HfApi:
        return HfApi(endpoint=self.endpoint, token=token or self.token or False, library_name="envhub")

    def _token_of(self, handle: SpaceHandle) -> str | None:
        if handle.token is not None and self.sealer is not None:
            return self.sealer.open(handle.token)
        return self.token

    def check(self, environment: EnvironmentDetail, options: SpaceOptions, token: str | None = None) -> SpaceOptions:
        """The options with the Space's namespace and name filled in (the user's own namespace by default)."""
        token = token or self.token
        if not token:
            raise InvalidInputError(
                "the space backend needs a Hub token: sign in with Hugging Face, or set HF_TOKEN on the server",
                code="hub_token_required",
            )
        if not environment.path and environment.source != Source.HUB:
            raise InvalidInputError(f"{environment.id} has no folder to upload and is not a Hub Space")
        if not environment.path and environment.sha:
            self._ensure_unmoved(environment, token)
        name = options.name or re.sub(r"[^A-Za-z0-9._-]", "-", environment.id.split("/")[-1].split(":")[-1])
        if not _NAME.match(name):
            raise InvalidInputError(f"option name {name!r} is not a valid Space name")
        namespace = options.namespace
        if namespace is None:
            try:
                namespace = str(self._api(token).whoami(cache=True)["name"])
            except HfHubHTTPError as exc:
                raise InvalidInputError(f"the Hub refused the token ({_hub_message(exc)})") from exc
        if not _NAME.match(namespace):
            raise InvalidInputError(f"option namespace {namespace!r} is not a valid user or organisation name")
        return options.model_copy(update={"namespace": namespace, "name": name})

    def _ensure_unmoved(self, environment: EnvironmentDetail, token: str) -> None:
        """A duplicate copies the Space as it is now: refuse when that is no longer the revision the catalog has
        (the endpoint would record one and serve another)."""
        try:
            now = self._api(token).space_info(environment.id).sha
        except HfHubHTTPError as exc:
            raise InvalidInputError(f"could not read {environment.id} on the Hub: {_hub_message(exc)}") from exc
        if now and now != environment.sha:
            raise InvalidInputError(
                f"{environment.id} has moved on to {now[:12]} on the Hub since the catalog's last sync, which saw "
                f"{(environment.sha or '')[:12]}: a duplicate would copy the newer one; sync the catalog and launch "
                "again, or launch the revision the catalog has with the process, docker or swarm backend",
                code="space_moved_on",
            )

    def start(self, spec: LaunchSpec[SpaceOptions], report: Report) -> Launched[SpaceHandle]:
        token = spec.token or self.token
        space_id = spec.options.space_id
        secrets = [{"key": k, "value": v} for k, v in spec.env.items()]
        settings: dict[str, Any] = {
            "private": spec.options.private,
            "space_hardware": spec.options.hardware,
            "space_sleep_time": spec.options.sleep_time,
            "space_secrets": secrets or None,
        }
        self.create(spec.environment, space_id, token, report, **settings)
        # Pausing or deleting the Space later needs the owner's token: kept sealed, never in clear.
        sealed = self.sealer.seal(spec.token) if spec.token and self.sealer is not None else None
        handle = SpaceHandle(
            server=spec.server_id,
            space=space_id,
            delete_on_stop=spec.options.delete_on_stop,
            token=sealed,
            private=spec.options.private,
        )
        spec.on_started(handle)  # on its row while the Space builds: another endpoint's stop then leaves it running
        url = self.follow(space_id, token, report)
        wait_healthy(
            url,
            timeout_s=120,
            alive=lambda: self.is_running(handle),
            what=f"Space {space_id}",
            headers=self.auth_headers(handle),
        )
        return Launched(url, handle)

    def create(
        self, environment: EnvironmentDetail, space_id: str, token: str | None, report: Report, **settings: Any
    ) -> None:
        """A template folder becomes a new Docker Space (create + upload); a Hub environment is duplicated."""
        api = self._api(token)
        try:
            if environment.path:
                report(f"creating Space {space_id} and uploading {Path(environment.path).name}")
                api.create_repo(space_id, repo_type="space", space_sdk="docker", exist_ok=True, **settings)
                api.upload_folder(
                    repo_id=space_id,
                    repo_type="space",
                    folder_path=environment.path,
                    ignore_patterns=_IGNORED,
                    commit_message=f"Deploy {environment.id} from envhub",
                )
            else:
                report(f"duplicating {environment.id} to {space_id}")
                api.duplicate_repo(environment.id, space_id, repo_type="space", exist_ok=True, **settings)
        except HfHubHTTPError as exc:
            refused = f"the Hub refused to create {space_id}: {_hub_message(exc)}"
            raise LaunchError(refused, code="hub_refused") from exc

    def follow(self, space_id: str, token: str | None, report: Report) -> str:
        """Follow the Space's build until the Hub says it runs; returns the URL its server answers on."""
        api = self._api(token)
        self._wait_running(api, space_id, report)
        url = self._url(api, space_id)
        report(f"{space_id} is running; waiting for {url}/health")
        return url

    def _wait_running(self, api: HfApi, space_id: str, report: Report) -> None:
        deadline = time.monotonic() + self.build_timeout_s
        last = ""
        while True:
            try:
                runtime = api.get_space_runtime(space_id)
            except HfHubHTTPError as exc:
                raise LaunchError(f"could not follow {space_id}: {_hub_message(exc)}") from exc
            stage = str(runtime.stage)
            if stage in _RUNNING:
                return
            if stage in _FAILED:
                message = runtime.raw.get("errorMessage") or "no message from the Hub"
                raise LaunchError(f"Space {space_id} stopped at {stage}: {message}", code="space_failed")
            if stage != last:
                report(f"Space {space_id} is {stage}")
                last = stage
            if time.monotonic() > deadline:
                late = f"Space {space_id} was still {stage} after {self.build_timeout_s:g} s"
                raise LaunchError(late, code="space_build_timeout")
            time.sleep(self.poll_s)

    @staticmethod
    def _url(api: HfApi, space_id: str) -> str:
        info = api.space_info(space_id)
        if info.host:
            return str(info.host).rstrip("/")
        return f"https://{info.subdomain}.hf.space"

    def stop(self, handle: SpaceHandle) -> None:
        space_id = handle.space
        try:
            api = self._api(self._token_of(handle))
            if handle.delete_on_stop:
                api.delete_repo(space_id, repo_type="space", missing_ok=True)
            else:
                api.pause_space(space_id)
        except HfHubHTTPError as exc:
            raise LaunchError(f"could not stop Space {space_id}: {_hub_message(exc)}") from exc

    def stop_leftover(self, server_id: str) -> None:
        pass  # Spaces live in their owners' namespaces: nothing is found by endpoint id alone

    def auth_headers(self, handle: SpaceHandle) -> dict[str, str]:
        """A private Space's JWT (none for a public one): what reaches its server, which may read it."""
        token = self._token_of(handle)
        if not handle.private or not token:
            return {}
        try:
            return self.keys.header(handle.space, token)
        except EnvhubError as exc:
            log.warning("%s", exc.message)
            return {}

    def is_running(self, handle: SpaceHandle) -> bool:
        try:
            return str(self._api(self._token_of(handle)).get_space_runtime(handle.space).stage) in _RUNNING
        except (HfHubHTTPError, OSError):
            return False

    def close(self) -> None:
        pass

    def sweep(self, live_instances: set[str]) -> None:
        pass  # nothing is started ahead here

    def managed_servers(self) -> set[str]:
        return set()
