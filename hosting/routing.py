"""Routing: every endpoint is served at <envhub>/endpoints/<id>, reaching its server wherever it runs.

The gateway path is built and parsed here only, and where the gateway reaches each
endpoint (its upstream) is looked up here. A path asked of an endpoint is
resolved (dot segments) before it is passed on, so `..` never climbs out of it; a
redirect an environment's server answers is kept inside its gateway path, and refused
when it points at another site.
"""

import posixpath
import re
import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from sqlalchemy import Engine
from sqlmodel import Session

from hosting.models import Backend, Endpoint, EndpointStatus
from hosting.runtimes import AnyRuntime, Handle, handle_of

__all__ = [
    "GATEWAY_PREFIX",
    "Routes",
    "Upstream",
    "endpoint_in_path",
    "gateway_location",
    "gateway_path",
    "inner_path",
]

GATEWAY_PREFIX = "/endpoints"
_GATEWAY_PATH = re.compile(r"^/endpoints/(?P<id>[A-Za-z0-9_-]{1,64})/?$")


def gateway_path(endpoint_id: str) -> str:
    """Where an endpoint is served on envhub: /endpoints/<id>."""
    return f"{GATEWAY_PREFIX}/{endpoint_id}"


def endpoint_in_path(path: str) -> str | None:
    """The endpoint id of a gateway URL's path (/endpoints/<id>, with or without a slash), else None."""
    match = _GATEWAY_PATH.match(path)
    return match["id"] if match else None


def inner_path(path: str) -> str | None:
    """The path within an endpoint, dot segments resolved ("a/../b" is "b"); None when it climbs out of it."""
    if not path:
        return ""
    depth = 0
    for segment in path.split("/"):
        if segment == "..":
            depth -= 1
            if depth < 0:
                return None
        elif segment not in ("", "."):
            depth += 1
    resolved = posixpath.normpath("/" + path).lstrip("/")
    return resolved + ("/" if path.endswith("/") and resolved else "")


def gateway_location(location: str, upstream: str, endpoint_id: str, path: str) -> str | None:
    """A redirect an environment's server answered to `path`, as the gateway passes it on; None when it
    leaves the endpoint (another site, or `..` out of its gateway path).

    An absolute URL on the server's own origin, or a path, becomes a path under the endpoint's
    gateway path (a server that knows its root path says it already); a relative reference is
    resolved as the client would resolve it, against the gateway URL it asked for.
    """
    prefix = gateway_path(endpoint_id)
    parts = urlsplit(location)
    if parts.scheme or parts.netloc:
        own = urlsplit(upstream)
        if (parts.scheme.lower(), parts.netloc.lower()) != (own.scheme.lower(), own.netloc.lower()):
            return None
        target = parts.path or "/"
    elif location.startswith("/"):
        target = parts.path
    else:
        target = urljoin(f"{prefix}/{path}", parts.path) if parts.path else f"{prefix}/{path}"
        if target != prefix and not target.startswith(prefix + "/"):
            return None  # the client would leave the gateway path
    if target != prefix and not target.startswith(prefix + "/"):
        target = prefix + target
    inside = inner_path(target[len(prefix) + 1 :])
    if inside is None:
        return None
    rebuilt = prefix + ("/" + inside if inside or target.endswith("/") else "")
    if parts.query:
        rebuilt += f"?{parts.query}"
    if parts.fragment:
        rebuilt += f"#{parts.fragment}"
    return rebuilt


# How long the gateway trusts a looked-up internal URL: the watch interval, so that an
# endpoint stopped through another replica is not reached at its old address for long.
RESOLVE_TTL_S = 2.0


@dataclass(frozen=True)
class Upstream:
    """Where the gateway reaches an endpoint's server, and what it adds to reach it."""

    url: str
    headers: dict[str, str]
    root_path: str = ""  # the server's ASGI root_path, when its backend set it: the gateway path


class Routes:
    """Where the gateway reaches each running endpoint: read from its row, and trusted for a moment."""

    def __init__(self, engine: Engine, runtimes: dict[Backend, AnyRuntime]) -> None:
        self.engine = engine
        self.runtimes = runtimes
        self._known: dict[str, tuple[Upstream, float]] = {}

    def resolve(self, endpoint_id: str) -> Upstream | None:
        """Where the gateway reaches a running endpoint; None when it is not running."""
        known = self._known.get(endpoint_id)
        if known is not None and time.monotonic() - known[1] < RESOLVE_TTL_S:
            return known[0]
        with Session(self.engine) as session:
            endpoint = session.get(Endpoint, endpoint_id)
        if endpoint is None or endpoint.status != EndpointStatus.RUNNING or not endpoint.internal_url:
            return None
        runtime = self.runtimes.get(endpoint.backend)
        handle = handle_of(runtime, endpoint.handle) if runtime is not None else None
        if runtime is None or handle is None:
            return None
        return self.remember(endpoint_id, runtime, endpoint.internal_url, handle)

    def remember(self, endpoint_id: str, runtime: AnyRuntime, url: str, handle: Handle) -> Upstream:
        upstream = Upstream(url, runtime.auth_headers(handle), handle.root_path)
        self._known[endpoint_id] = (upstream, time.monotonic())
        return upstream

    def forget(self, endpoint_id: str) -> None:
        self._known.pop(endpoint_id, None)
