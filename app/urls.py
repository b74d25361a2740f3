"""The URLs envhub hands out, and the one it reaches itself at.

Where users reach envhub (the public base) is decided here only: ENVHUB_PUBLIC_URL when
set, else the Space's own host on a Space, else the scheme and host the request came
with (behind a proxy, X-Forwarded-Proto and X-Forwarded-Host: see app.forwarded).
envhub reaches its own endpoints at the address it listens on, never at one taken from a
Host header.
"""

from urllib.parse import urlsplit

from starlette.requests import HTTPConnection

from app.settings import Settings
from gateway.paths import endpoint_in_path, gateway_path

__all__ = ["endpoint_url", "own_endpoint", "own_gateway", "public_base"]


def public_base(settings: Settings, scheme: str, host: str) -> str:
    """Where users reach envhub, given the scheme and host a request came with."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    if settings.space_host:
        return "https://" + settings.space_host.split(",")[0].strip()
    return f"{scheme}://{host}"


def connection_base(settings: Settings, connection: HTTPConnection) -> str:
    """Where users reach envhub, as a request (or WebSocket) to it says."""
    scheme = {"ws": "http", "wss": "https"}.get(connection.url.scheme, connection.url.scheme)
    return public_base(settings, scheme, connection.url.netloc)


def endpoint_url(base: str, endpoint_id: str) -> str:
    """An endpoint's gateway URL, the one to give a trainer."""
    return base.rstrip("/") + gateway_path(endpoint_id)


def own_gateway(connection: HTTPConnection, endpoint_id: str) -> str:
    """The endpoint's gateway on the address this server listens on (loopback or its own host)."""
    host, port = connection.scope.get("server") or ("127.0.0.1", 80)
    if host in ("0.0.0.0", "::", ""):  # noqa: S104  (a listening address, not a bind)
        host = "127.0.0.1"
    if ":" in str(host):
        host = f"[{host}]"
    return f"http://{host}:{port}" + gateway_path(endpoint_id)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def own_endpoint(url: str, settings: Settings, connection: HTTPConnection) -> str | None:
    """The endpoint id when url is one of this server's gateway URLs (as handed out, or on its own address)."""
    parts = urlsplit(url.strip())
    endpoint_id = endpoint_in_path(parts.path)
    if endpoint_id is None or parts.query:
        return None
    origins = {
        _origin(str(connection.base_url)),
        _origin(own_gateway(connection, "x")),
        connection_base(settings, connection),
    }
    return endpoint_id if _origin(url.strip()) in {_origin(o) for o in origins} else None
