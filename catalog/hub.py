"""The Hugging Face Hub adapter: lists environment Spaces and datasets, fetches their files.

It speaks to whatever `HF_ENDPOINT` names through huggingface_hub's HTTP session and
retry helper, with envhub's own timeout and retry bounds, and returns plain dataclasses.
"""

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx2
from huggingface_hub import hf_hub_url
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled
from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, http_backoff, http_stream_backoff

from catalog.space_access import SpaceKeys
from core.errors import HubUnavailableError

log = logging.getLogger(__name__)

ENVIRONMENT_TAG = "openenv"
DATASET_TAGS = ("openenv", "rl-environment")
_REPO_GONE = ("RepoNotFound", "RevisionNotFound")
# Retried: a Hub that answered slowly or broke off mid-answer. Not retried: one that cannot be
# reached at all (offline, refused, no DNS); that fails at once and the next sync tries again.
_TRANSIENT = (
    httpx2.ReadTimeout,
    httpx2.WriteTimeout,
    httpx2.PoolTimeout,
    httpx2.ReadError,
    httpx2.WriteError,
    httpx2.RemoteProtocolError,
)
_SPACE_EXPAND = [
    "author", "sha", "lastModified", "likes", "trendingScore", "sdk", "tags",
    "runtime", "subdomain", "private", "disabled",
]  # fmt: skip
_DATASET_EXPAND = [
    "author", "sha", "lastModified", "likes", "downloads", "tags", "cardData", "description",
]  # fmt: skip


@dataclass(frozen=True)
class SpaceListing:
    """One Space as the Hub's listing describes it."""

    id: str
    sha: str | None = None
    author: str | None = None
    last_modified: datetime | None = None
    likes: int = 0
    trending_score: float = 0
    sdk: str | None = None
    tags: list[str] = field(default_factory=list)
    stage: str | None = None
    host: str | None = None


@dataclass(frozen=True)
class DatasetListing:
    id: str
    sha: str | None = None
    author: str | None = None
    last_modified: datetime | None = None
    likes: int = 0
    downloads: int = 0
    tags: list[str] = field(default_factory=list)
    description: str = ""
    card: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SpaceRuntimeInfo:
    """Where a Space runs and what the Hub says it is doing now."""

    stage: str | None
    host: str | None
    error_message: str | None = None
    private: bool = False


def space_credentials(
    space_id: str, runtime: SpaceRuntimeInfo | None, token: str | None, keys: SpaceKeys
) -> dict[str, dict[str, str]]:
    """A key to a private Space's own `*.hf.space` host, scoped to it, as `OutboundSession.credentials`: the Space's
    short-lived JWT, asked of the Hub with the token (which itself never reaches the Space).

    Empty for a public Space, a Space served elsewhere, without a token, or when the Hub gives no key.
    """
    if not token or runtime is None or not runtime.private or not runtime.host:
        return {}
    if not (urlsplit(runtime.host).hostname or "").lower().endswith(".hf.space"):
        return {}
    try:
        return {runtime.host: keys.header(space_id, token)}
    except HubUnavailableError as exc:
        log.info("%s", exc.message)
        return {}


@dataclass(frozen=True)
class RepoFile:
    content: bytes
    cut: bool = False  # the file was longer than the limit asked for


class Hub(Protocol):
    """What the catalog needs from the Hub."""

    endpoint: str

    @property
    def requests(self) -> int: ...

    def list_environment_spaces(self) -> Iterator[SpaceListing]: ...

    def list_environment_datasets(self) -> Iterator[DatasetListing]: ...

    def fetch_space_file(self, space_id: str, path: str, revision: str, limit: int) -> RepoFile | None: ...

    def space_runtime(self, space_id: str) -> SpaceRuntimeInfo | None: ...


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _tags(value: Any) -> list[str]:
    return [t for t in value if isinstance(t, str)] if isinstance(value, list) else []


def _datetime(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None


def _repo_id(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    repo_id = item.get("id")
    if isinstance(repo_id, str) and repo_id.count("/") == 1 and all(repo_id.split("/")):
        return repo_id
    return None


def space_listing(item: dict[str, Any], repo_id: str) -> SpaceListing:
    runtime = item.get("runtime") if isinstance(item.get("runtime"), dict) else {}
    subdomain = _str(item.get("subdomain"))
    return SpaceListing(
        id=repo_id,
        sha=_str(item.get("sha")),
        author=_str(item.get("author")) or repo_id.split("/")[0],
        last_modified=_datetime(item.get("lastModified")),
        likes=_int(item.get("likes")),
        trending_score=_float(item.get("trendingScore")),
        sdk=_str(item.get("sdk")),
        tags=_tags(item.get("tags")),
        stage=_str(runtime.get("stage")) if runtime else None,
        host=f"https://{subdomain}.hf.space" if subdomain else None,
    )


def dataset_listing(item: dict[str, Any], repo_id: str) -> DatasetListing:
    card = item.get("cardData")
    return DatasetListing(
        id=repo_id,
        sha=_str(item.get("sha")),
        author=_str(item.get("author")) or repo_id.split("/")[0],
        last_modified=_datetime(item.get("lastModified")),
        likes=_int(item.get("likes")),
        downloads=_int(item.get("downloads")),
        tags=_tags(item.get("tags")),
        description=_str(item.get("description")) or "",
        card=card if isinstance(card, dict) else {},
    )


class HubClient:
    """The real Hub (or anything speaking its API at `endpoint`)."""

    def __init__(
        self,
        endpoint: str,
        token: str | None = None,
        *,
        timeout_s: float = 20,
        max_retries: int = 4,
        backoff_s: float = 1,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._token = token
        self._timeout = timeout_s
        self._http_timeout = httpx2.Timeout(timeout_s, connect=min(timeout_s, 5.0))
        self._max_retries = max_retries
        self._backoff_s = backoff_s
        self._counter = itertools.count(1)
        self._requests = 0

    @property
    def requests(self) -> int:
        """HTTP requests made so far (retries of one request count once)."""
        return self._requests

    def _count(self) -> None:
        self._requests = next(self._counter)

    def _headers(self) -> dict[str, str]:
        return build_hf_headers(token=self._token, library_name="envhub")

    def _get(self, url: str, params: list[tuple[str, str]] | None = None) -> httpx2.Response:
        """GET with envhub's timeout and bounded retries of transient failures."""
        self._count()
        return http_backoff(
            "GET",
            url,
            params=params,
            headers=self._headers(),
            timeout=self._http_timeout,
            retry_on_exceptions=_TRANSIENT,
            max_retries=self._max_retries,
            base_wait_time=self._backoff_s,
        )

    def _unavailable(self, what: str, exc: Exception) -> HubUnavailableError:
        if isinstance(exc, HfHubHTTPError) and exc.response is not None:
            reason = f"HTTP {exc.response.status_code}"
            if exc.server_message:
                reason += f": {exc.server_message.strip().splitlines()[0][:200]}"
        elif isinstance(exc, OfflineModeIsEnabled):
            reason = "HF_HUB_OFFLINE is set; unset it to reach the Hub"
        elif isinstance(exc, httpx2.TimeoutException):
            reason = f"no answer within {self._timeout:g} s"
        elif isinstance(exc, ValueError):
            reason = "the answer was not valid JSON"
        else:
            reason = str(exc) or type(exc).__name__
        return HubUnavailableError(f"{what} at {self.endpoint} failed: {reason}")

    def _list(self, kind: str, params: list[tuple[str, str]]) -> Iterator[dict[str, Any]]:
        """Every item of a listing, following the Link header page by page."""
        url: str | None = f"{self.endpoint}/api/{kind}"
        query: list[tuple[str, str]] | None = params
        while url is not None:
            try:
                response = self._get(url, query)
                hf_raise_for_status(response)
                page = response.json()
            except (httpx2.HTTPError, OSError, ValueError) as exc:
                raise self._unavailable(f"listing {kind}", exc) from exc
            if not isinstance(page, list):
                raise HubUnavailableError(
                    f"listing {kind} at {self.endpoint} returned {type(page).__name__}, not a list"
                )
            yield from page
            url, query = response.links.get("next", {}).get("url"), None

    def list_environment_spaces(self) -> Iterator[SpaceListing]:
        params = [("filter", ENVIRONMENT_TAG), *(("expand", e) for e in _SPACE_EXPAND)]
        for item in self._list("spaces", params):
            repo_id = _repo_id(item)
            if repo_id is None:
                log.warning("skipping a listed Space without a valid owner/name id: %.200r", item)
                continue
            yield space_listing(item, repo_id)

    def list_environment_datasets(self) -> Iterator[DatasetListing]:
        seen: set[str] = set()
        for tag in DATASET_TAGS:
            params = [("filter", tag), *(("expand", e) for e in _DATASET_EXPAND)]
            for item in self._list("datasets", params):
                repo_id = _repo_id(item)
                if repo_id is None or repo_id in seen:
                    continue
                seen.add(repo_id)
                yield dataset_listing(item, repo_id)

    def fetch_space_file(self, space_id: str, path: str, revision: str, limit: int) -> RepoFile | None:
        """A file of a Space at a revision, at most `limit` bytes; None when it does not exist."""
        url = hf_hub_url(space_id, path, repo_type="space", revision=revision, endpoint=self.endpoint)
        try:
            self._count()
            with http_stream_backoff(
                "GET",
                url,
                headers=self._headers(),
                timeout=self._http_timeout,
                retry_on_exceptions=_TRANSIENT,
                max_retries=self._max_retries,
                base_wait_time=self._backoff_s,
            ) as response:
                if response.status_code == 404 and response.headers.get("X-Error-Code") not in _REPO_GONE:
                    return None
                if response.status_code >= 400:
                    response.read()
                    hf_raise_for_status(response)
                content = bytearray()
                for chunk in response.iter_bytes():
                    content += chunk
                    if len(content) > limit:
                        return RepoFile(bytes(content[:limit]), cut=True)
                return RepoFile(bytes(content))
        except (httpx2.HTTPError, OSError) as exc:
            raise self._unavailable(f"downloading {path} of {space_id}", exc) from exc

    def space_runtime(self, space_id: str) -> SpaceRuntimeInfo | None:
        """The Space's stage and host now (one request, never to the Space itself); None when it is gone."""
        url = f"{self.endpoint}/api/spaces/{space_id}"
        try:
            response = self._get(url)
            if response.status_code == 404:
                return None
            hf_raise_for_status(response)
            info = response.json()
        except (httpx2.HTTPError, OSError, ValueError) as exc:
            raise self._unavailable(f"reading the runtime of {space_id}", exc) from exc
        if not isinstance(info, dict):
            raise HubUnavailableError(f"the Hub described {space_id} as {type(info).__name__}, not an object")
        raw = info.get("runtime")
        runtime: dict[str, Any] = raw if isinstance(raw, dict) else {}
        subdomain = _str(info.get("subdomain"))
        host = _str(info.get("host")) or (f"https://{subdomain}.hf.space" if subdomain else None)
        return SpaceRuntimeInfo(
            stage=_str(runtime.get("stage")),
            host=host.rstrip("/") if host else None,
            error_message=_str(runtime.get("errorMessage")),
            private=info.get("private") is True,
        )
