"""Where endpoints are served on envhub, and the paths inside them: built and parsed here only.

Every endpoint is served at <envhub>/endpoints/<id>. A path asked of an endpoint is resolved (dot segments)
before it is passed on, so `..` never climbs out of it; a redirect an environment's server answers is kept
inside its gateway path, and refused when it points at another site; what is passed on is percent-encoded
again, so a decoded %0D or %20 never reaches a server's request line.
"""

import posixpath
import re
from urllib.parse import urljoin, urlsplit

__all__ = [
    "GATEWAY_PREFIX",
    "PATH_SAFE",
    "endpoint_in_path",
    "gateway_location",
    "gateway_path",
    "inner_path",
    "is_session_path",
    "session_path",
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


# What may stand unencoded in a path passed on (RFC 3986's pchar and "/"): anything else is encoded again.
PATH_SAFE = "/:@!$&'()*+,;=-._~"
_SESSION_PATH = re.compile(rf"^{GATEWAY_PREFIX}/(?P<id>[A-Za-z0-9_-]{{1,64}})/(?P<path>.*)$")


def session_path(path: str) -> tuple[str, str] | None:
    """(endpoint id, path inside it) of a gateway WebSocket's path, else None."""
    match = _SESSION_PATH.match(path)
    return (match["id"], match["path"]) if match else None


def is_session_path(path: str) -> bool:
    """Whether a WebSocket to this path is a gateway session (envhub's server relays those itself)."""
    return _SESSION_PATH.match(path) is not None
