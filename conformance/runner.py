"""Running the checklist against a base URL: its checks in order through the engine, the report around them.

The whole run stops at a total deadline: what is left is reported as not run.
"""

import asyncio
import logging
import time
from collections.abc import Iterable
from datetime import UTC, datetime

from conformance.context import Context, ServerCapacity
from conformance.engine import Check, run_checks
from conformance.report import Report, ServerProfile, Suite
from core.outbound import OutboundSession

log = logging.getLogger(__name__)


def _order(check_id: str) -> tuple[int, str]:
    digits = "".join(c for c in check_id if c.isdigit())
    return int(digits or 0), check_id


async def run_checklist(
    url: str,
    checks: Iterable[Check[Context]],
    outbound: OutboundSession,
    *,
    timeout_s: float = 10,
    deadline_s: float = 30,
    server_capacity: ServerCapacity | None = None,
) -> Report:
    """Run checks in order against url; the report lists them by checklist number. `server_capacity` reads what each
    server of the pool behind the URL holds, when it is envhub's own endpoint."""
    checked_at = datetime.now(UTC)
    started = time.perf_counter()
    ctx = Context(url, outbound, timeout_s=timeout_s, deadline_s=deadline_s, server_capacity=server_capacity)
    try:
        results = await run_checks(ctx, checks)
    finally:
        try:
            async with asyncio.timeout(3):
                await ctx.close_all()
        except TimeoutError:
            log.info("closing the sessions of a check of %s took too long", url)
    facts = ctx.facts
    has_newer = facts.task_api or facts.reset_observation
    profile = ServerProfile(
        mode=facts.mode,
        generation=("0.10" if has_newer else "older") if facts.schema is not None else None,
        env_name=facts.env_name,
        max_sessions=facts.max_sessions,
        mcp_tools=len(facts.tools) if facts.tools else None,
        web_ui=facts.web_ui,
    )
    return Report(
        suite=Suite.PROTOCOL,
        target=ctx.base,
        checked_at=checked_at,
        duration_s=round(time.perf_counter() - started, 3),
        profile=profile,
        results=tuple(sorted(results, key=lambda r: _order(r.check_id))),
    )
