"""Reaching a live environment from the UI: one outbound session per tab, pinned to the address its guard checked.

What the environment says about itself is read through it (protocol.interface); every
request and WebSocket of the session then goes to that address.
"""

from core.errors import RefusedURLError
from core.outbound import OutboundGuard, OutboundSession

PROBE_TIMEOUT_S = 5.0


def live_session(
    guard: OutboundGuard,
    *trusted: str,
    credentials: dict[str, dict[str, str]] | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> OutboundSession:
    """The outbound session for one live URL: the trusted prefixes (envhub's own gateway) skip the
    guard, every other URL goes through it (like checks and registration), and every request and
    WebSocket of the session goes to the address the guard checked."""
    return OutboundSession(guard.with_trusted(*trusted), timeout_s=timeout_s, credentials=credentials or {})


async def outbound_refusal(outbound: OutboundSession, url: str) -> str | None:
    """Why the session may not connect to a URL, or None; the URL's host is pinned from here on."""
    try:
        await outbound.pin(outbound.guard.normalize(url))
    except RefusedURLError as exc:
        return exc.message
    return None
