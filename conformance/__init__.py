"""Black-box conformance checks of an OpenEnv endpoint URL over HTTP, WebSocket, MCP and the Task API.

The checks follow the numbered checklist of `shared/reference/openenv-protocol.md` §6.
HTTP checks run first, then the WebSocket session checks (one short episode), then the
MCP session check; the report lists them by number.
"""

from conformance import discovery, mcp, sessions, tasks
from conformance.report import (
    CheckResult,
    ConformanceReport,
    Evidence,
    Level,
    Outcome,
    ServerProfile,
)
from conformance.runner import Check, run_checks
from core.outbound import OutboundGuard, OutboundSession

__all__ = [
    "CHECKS",
    "Check",
    "CheckResult",
    "ConformanceReport",
    "Evidence",
    "Level",
    "Outcome",
    "ServerProfile",
    "check_url",
]

_WEB = ("37", "38")
CHECKS: tuple[Check, ...] = (
    *(c for c in discovery.checks if c.id not in _WEB),
    *mcp.checks,
    *tasks.checks,
    *(c for c in discovery.checks if c.id in _WEB),
    *sessions.checks,
    *mcp.session_checks,
)


async def check_url(
    url: str,
    guard: OutboundGuard,
    *,
    timeout_s: float = 10,
    deadline_s: float = 30,
    headers: dict[str, str] | None = None,
) -> ConformanceReport:
    """Check a base URL against the whole checklist; RefusedURLError when the guard will not fetch it."""
    url = guard.normalize(url)
    outbound = OutboundSession(guard, timeout_s=timeout_s, headers=headers or {})
    try:
        await outbound.pin(url)  # refuse before any check runs; every request then goes to this address
        return await run_checks(url, CHECKS, outbound, timeout_s=timeout_s, deadline_s=deadline_s)
    finally:
        await outbound.aclose()
