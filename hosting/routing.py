"""Routing: every endpoint is served at <envhub>/endpoints/<id>, reaching its servers wherever they run.

The gateway path is built and parsed here only, and where the gateway reaches each
endpoint (its pool of replicas, hosting.pools) is looked up here. A path asked of an endpoint is
resolved (dot segments) before it is passed on, so `..` never climbs out of it; a
redirect an environment's server answers is kept inside its gateway path, and refused
when it points at another site.
"""

import posixpath
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from hosting.limits import EndpointLimits
from hosting.models import Backend, Endpoint, EndpointStatus, Replica, ReplicaStatus
from hosting.options import ReplicaRange
from hosting.pools import Pool, Upstream
from hosting.runtimes import AnyRuntime, handle_of

ROUTED = (ReplicaStatus.READY, ReplicaStatus.DRAINING)  # replicas the gateway reaches: draining ones for their sessions

__all__ = [
    "GATEWAY_PREFIX",
    "Down",
    "Routes",
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


# How long the gateway trusts what it read of a pool's replicas: the watch interval, so that a
# replica stopped or added through another envhub is not missed for long.
RESOLVE_TTL_S = 2.0
_ABSENT_MAX = 10_000  # ids remembered as not running (most are guesses: a flood of them costs one read each)


@dataclass(frozen=True)
class Down:
    """Why the gateway reaches no pool: the endpoint is not running (reason), or there is no such endpoint (None)."""

    reason: str | None


class Routes:
    """Where the gateway reaches each running endpoint: its pool, read from the replicas' rows, trusted for a moment.

    The pools live as long as their endpoints run, so that what they count (sessions per
    replica, what each server said it holds) carries over each read.
    """

    def __init__(
        self, engine: Engine, runtimes: dict[Backend, AnyRuntime], limits: EndpointLimits | None = None
    ) -> None:
        self.engine = engine
        self.runtimes = runtimes
        self.limits = limits or EndpointLimits()
        self.on_pressure: Callable[[str], None] = lambda endpoint_id: None  # set by whoever scales the pools
        self._pools: dict[str, tuple[Pool, float]] = {}
        self._absent: dict[str, tuple[Down, float]] = {}
        self._lock = threading.Lock()

    def cached(self, endpoint_id: str) -> Pool | Down | None:
        """What the last read found while it is fresh (a pool, or why there is none), without reading: None when a
        read is due. The gateway calls this on its event loop, and reads off it."""
        now = time.monotonic()
        with self._lock:
            known = self._pools.get(endpoint_id)
            if known is not None and now - known[1] < RESOLVE_TTL_S:
                return known[0]
            absent = self._absent.get(endpoint_id)
        return absent[0] if absent is not None and now - absent[1] < RESOLVE_TTL_S else None

    def lookup(self, endpoint_id: str) -> Pool | Down:
        """The endpoint's pool, or why there is none; reads the database when what is cached is stale."""
        found = self.cached(endpoint_id)
        if found is None:
            found = self.refresh(endpoint_id)
        if found is None:
            with self._lock:
                found = self._absent.get(endpoint_id, (Down(None), 0.0))[0]
        return found

    def resolve(self, endpoint_id: str) -> Pool | None:
        """The pool of a running endpoint; None when it is not running."""
        with self._lock:
            known = self._pools.get(endpoint_id)
        if known is not None and time.monotonic() - known[1] < RESOLVE_TTL_S:
            return known[0]
        return self.refresh(endpoint_id)

    def refresh(self, endpoint_id: str) -> Pool | None:
        """Read the endpoint's replicas now (after the pool changed here)."""
        with Session(self.engine) as session:
            endpoint = session.get(Endpoint, endpoint_id)
            rows = session.exec(
                select(Replica).where(col(Replica.endpoint) == endpoint_id, col(Replica.status).in_(ROUTED))
            ).all()
        runtime = self.runtimes.get(endpoint.backend) if endpoint is not None else None
        if endpoint is None or endpoint.status != EndpointStatus.RUNNING or runtime is None:
            self.forget(endpoint_id)
            down = Down(
                None if endpoint is None else f"endpoint {endpoint_id} is {endpoint.status.value}: {endpoint.message}"
            )
            with self._lock:
                if len(self._absent) >= _ABSENT_MAX:
                    self._absent.clear()
                self._absent[endpoint_id] = (down, time.monotonic())
            return None
        replicas = {}
        for row in rows:
            handle = handle_of(runtime, row.handle)
            if handle is None or not row.internal_url:
                continue
            upstream = Upstream(row.internal_url, runtime.auth_headers(handle), handle.root_path)
            replicas[row.id] = (upstream, row.capacity, row.status == ReplicaStatus.READY)
        size = ReplicaRange.model_validate(endpoint.options.get("replicas", 1))
        limits = self.limits
        with self._lock:
            known = self._pools.get(endpoint_id)
            pool = (
                known[0]
                if known is not None
                else Pool(endpoint_id, queue=limits.queue, queue_per_client=limits.queue_per_client)
            )
            self._pools[endpoint_id] = (pool, time.monotonic())
            self._absent.pop(endpoint_id, None)
        pool.most = size.max
        pool.owner, pool.private = endpoint.owner, endpoint.options.get("private") is True
        pool.on_pressure = lambda: self.on_pressure(endpoint_id)
        pool.set_replicas(replicas)
        return pool

    def pools(self) -> list[Pool]:
        """Every pool as last read."""
        with self._lock:
            return [pool for pool, _ in self._pools.values()]

    def known(self, endpoint_id: str) -> Pool | None:
        """The pool as last read, without reading again."""
        with self._lock:
            known = self._pools.get(endpoint_id)
        return known[0] if known is not None else None

    def forget(self, endpoint_id: str) -> None:
        with self._lock:
            self._pools.pop(endpoint_id, None)
