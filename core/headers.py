"""What a request's headers say of where it came from: the bearer token it carries, and the web page that sent it."""

from collections.abc import Mapping
from urllib.parse import SplitResult, urlsplit

__all__ = ["bearer", "page_origin", "reached_hosts"]


def bearer(headers: Mapping[str, str]) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (lower-case names), or None."""
    scheme, _, token = (headers.get("authorization") or "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


def page_origin(headers: Mapping[str, str]) -> SplitResult | None:
    """The `Origin` of the web page that sent the request, parsed; None when no page sent it (trainers, scripts and
    MCP clients send no Origin)."""
    origin = headers.get("origin")
    return None if origin is None else urlsplit(origin.strip())


def reached_hosts(headers: Mapping[str, str]) -> list[str]:
    """The host[:port] the request was sent to, in lower case: the one a proxy says it forwarded first, then Host."""
    named = (headers.get("x-forwarded-host"), headers.get("host"))
    return [host.split(",")[0].strip().lower() for host in named if host and host.split(",")[0].strip()]
