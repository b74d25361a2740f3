"""Black-box conformance checks of an OpenEnv endpoint URL over HTTP, WebSocket, MCP and the Task API.

The checks follow the numbered checklist of `shared/reference/openenv-protocol.md` §6.
HTTP checks run first, then the WebSocket session checks (one short episode), then the
MCP session check; the report lists them by number.
"""

import httpx

from conformance import discovery, mcp, tasks, websocket_checks
from conformance.context import Context, Evidence, ServerCapacity
from conformance.engine import Check, CheckResult, Level, Outcome
from conformance.report import Report, ServerProfile, Suite
from conformance.runner import run_checklist
from core.outbound import OutboundGuard, OutboundSession

__all__ = [
    "CHECKS",
    "Check",
    "CheckResult",
    "Evidence",
    "Level",
    "Outcome",
    "Report",
    "ServerCapacity",
    "ServerProfile",
    "Suite",
    "check_url",
    "unreachable",
]

_WEB = ("37", "38")
CHECKS: tuple[Check[Context], ...] = (
    *(c for c in discovery.checks if c.check_id not in _WEB),
    *mcp.checks,
    *tasks.checks,
    *(c for c in discovery.checks if c.check_id in _WEB),
    *websocket_checks.checks,
    *mcp.session_checks,
)


async def check_url(
    url: str,
    guard: OutboundGuard,
    *,
    timeout_s: float = 10,
    deadline_s: float = 30,
    headers: dict[str, str] | None = None,
    server_capacity: ServerCapacity | None = None,
) -> Report:
    """Check a base URL against the whole checklist; RefusedURLError when the guard will not fetch it.
    `server_capacity` reads the sessions each server of an envhub endpoint's pool holds (None while unknown)."""
    url = guard.normalize(url)
    outbound = OutboundSession(guard, timeout_s=timeout_s, headers=headers or {})
    try:
        await outbound.pin(url)  # refuse before any check runs; every request then goes to this address
        return await run_checklist(
            url, CHECKS, outbound, timeout_s=timeout_s, deadline_s=deadline_s, server_capacity=server_capacity
        )
    finally:
        await outbound.aclose()


async def unreachable(url: str, guard: OutboundGuard, *, timeout_s: float = 10) -> str | None:
    """Why no server answers at a URL at all (the connection refused, or never made), or None when one answers,
    whatever it says; RefusedURLError when the guard will not fetch it."""
    url = guard.normalize(url)
    outbound = OutboundSession(guard, timeout_s=timeout_s)
    try:
        await outbound.pin(url)
        await outbound.fetch("GET", f"{url.rstrip('/')}/health", max_bytes=1024)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        return _why_not_connected(exc)
    except (httpx.HTTPError, TimeoutError):
        return None  # something answered, or took the connection and hung: that is for the checks to report
    finally:
        await outbound.aclose()
    return None


def _why_not_connected(exc: BaseException) -> str:
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "the connection was refused"
        if isinstance(cause, TimeoutError | httpx.ConnectTimeout):
            return "the connection timed out"
        cause = cause.__cause__ or cause.__context__
    return str(exc) or type(exc).__name__
