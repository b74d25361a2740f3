"""Whether an environment's server is up: GET /health, then one reset, and how long each took.

The reset goes over HTTP in simulation mode, and over WebSocket where the server serves
no HTTP /reset (production mode). A probe never raises for what the server does: it
answers a status and a message.
"""

import asyncio
import json
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from core.errors import RefusedURLError
from core.outbound import Fetched, OutboundSession
from envclient.interface import Interface, read_interface
from protocol.frames import CLOSE, reset_frame

__all__ = ["HEALTH_OK", "HealthStatus", "Probe", "healthy", "probe"]

# The stable codes beside a probe's message (a health row's `reason`): programs read these, people the message.
HEALTH_OK = "health_ok"  # /health answered healthy, and the reset worked
NO_ANSWER = "no_answer"  # GET /health was refused, reset or timed out
BAD_HEALTH = "bad_health_answer"  # GET /health answered, but not 200 {"status": "healthy"}
RESET_FAILED = "reset_failed"
PROBE_FAILED = "probe_failed"  # /health answered; what came after it (the reset, the interface) raised


class HealthStatus(StrEnum):
    UP = "up"
    DOWN = "down"
    SLEEPING = "sleeping"
    BUILDING = "building"
    ERROR = "error"


@dataclass
class Probe:
    """What one probe saw."""

    status: HealthStatus
    message: str = ""
    reason: str = HEALTH_OK
    health_ms: float | None = None
    reset_ms: float | None = None
    interface: Interface | None = None  # when it was read


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _json(fetched: Fetched) -> Any:
    if fetched.cut or fetched.status != 200:
        return None
    try:
        return json.loads(fetched.body)
    except ValueError:
        return None


def healthy(fetched: Fetched) -> bool:
    """Whether GET /health answered {"status": "healthy"}."""
    body = _json(fetched)
    return isinstance(body, dict) and body.get("status") == "healthy"


async def _ws_reset(base: str, outbound: OutboundSession) -> tuple[float | None, str]:
    """Reset over WebSocket: seconds taken, or None and why."""
    socket = await outbound.websocket("ws" + base.removeprefix("http") + "/ws")
    try:
        started = time.perf_counter()
        await socket.send(json.dumps(reset_frame()))
        async with asyncio.timeout(outbound.timeout_s):
            reply = await socket.recv()
        seconds = time.perf_counter() - started
        frame = json.loads(reply) if isinstance(reply, str) else {}
        if frame.get("type") != "observation":
            code = (frame.get("data") or {}).get("code") if isinstance(frame, dict) else None
            return None, f"WebSocket reset answered {code or 'something other than an observation'}"
        await socket.send(json.dumps(CLOSE))
        return seconds, ""
    finally:
        await socket.close()


async def probe(base: str, outbound: OutboundSession, *, with_interface: bool = False) -> Probe:
    """GET /health, then one reset, then (if asked) the interface."""
    base = base.rstrip("/")
    try:
        fetched = await outbound.fetch("GET", base + "/health")
    except RefusedURLError as exc:
        return Probe(HealthStatus.ERROR, exc.message, exc.code)
    except (TimeoutError, OSError, Exception) as exc:  # refused, reset, timed out: nobody answers
        return Probe(HealthStatus.DOWN, f"GET /health: {type(exc).__name__} {exc}".strip(), NO_ANSWER)
    health_ms = _ms(fetched.seconds)
    if not healthy(fetched):
        what = f"HTTP {fetched.status}" + (f" {fetched.text()[:120]}" if fetched.body else "")
        return Probe(HealthStatus.ERROR, f"GET /health answered {what}", BAD_HEALTH, health_ms=health_ms)
    result = Probe(HealthStatus.UP, health_ms=health_ms)
    try:
        reset = await outbound.fetch("POST", base + "/reset", json={})
        if reset.status in (404, 405):
            seconds, why = await _ws_reset(base, outbound)
            result.reset_ms = _ms(seconds) if seconds is not None else None
            result.message = why
            result.reason = RESET_FAILED if seconds is None else HEALTH_OK
        elif reset.status == 200:
            result.reset_ms = _ms(reset.seconds)
        else:
            result.status = HealthStatus.ERROR
            result.message = f"POST /reset answered HTTP {reset.status}"
            result.reason = RESET_FAILED
        if with_interface:
            result.interface = await read_interface(base, outbound)
    except Exception as exc:  # /health answered, so the server is up; say what else failed
        result.message = f"{type(exc).__name__}: {exc}".strip()
        result.reason = PROBE_FAILED
    return result
