"""Running the checklist against a base URL: checks registered in order, each bounded, the report around them.

A check is an async function of the context (conformance.context) that returns a message
when it passes. The whole run stops at a total deadline: what is left is reported as not run.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from conformance.context import Context, Fail, NotRun, ServerCapacity, Skip
from conformance.report import CheckResult, ConformanceReport, Level, Outcome, ServerProfile, Severity
from core.outbound import OutboundSession

log = logging.getLogger(__name__)

CheckFn = Callable[[Context], Awaitable[str | None]]


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    run: CheckFn
    severity: Severity = Severity.CORE
    since: str | None = None  # the protocol version that brought what it checks; older servers skip it

    @property
    def level(self) -> Level:
        return Level.of(self.severity, self.since)


class Registry(list[Check]):
    """The checks of one module, in the order they run."""

    def __call__(
        self, check_id: str, title: str, severity: Severity = Severity.CORE, *, since: str | None = None
    ) -> Callable[[CheckFn], CheckFn]:
        def register(fn: CheckFn) -> CheckFn:
            self.append(Check(check_id, title, fn, severity, since))
            return fn

        return register


async def _run_one(ctx: Context, check: Check) -> CheckResult:
    ctx.current = check.id
    ctx.evidence = []
    started = time.perf_counter()
    message = ""
    if ctx.remaining() <= 0:
        outcome, message = Outcome.ERROR, "not run: the total deadline passed before this check"
    else:
        try:
            async with asyncio.timeout(ctx.remaining()):
                message = await check.run(ctx) or ""
            outcome = Outcome.PASS
        except Fail as exc:
            outcome, message = Outcome.FAIL, str(exc)
        except Skip as exc:
            outcome, message = Outcome.SKIP, str(exc)
        except NotRun as exc:
            outcome, message = Outcome.ERROR, str(exc)
        except TimeoutError:
            outcome, message = Outcome.ERROR, "not finished: the total deadline passed during this check"
        except Exception as exc:
            log.warning("check %s of %s raised", check.id, ctx.base, exc_info=True)
            outcome, message = Outcome.ERROR, f"the checker failed: {type(exc).__name__}: {exc}"
    return CheckResult(
        id=check.id,
        title=check.title,
        level=check.level,
        result=outcome,
        message=message,
        evidence=tuple(ctx.evidence[:12]),
        duration_ms=round((time.perf_counter() - started) * 1000, 2),
    )


def _order(check_id: str) -> tuple[int, str]:
    digits = "".join(c for c in check_id if c.isdigit())
    return int(digits or 0), check_id


async def run_checks(
    url: str,
    checks: Iterable[Check],
    outbound: OutboundSession,
    *,
    timeout_s: float = 10,
    deadline_s: float = 30,
    server_capacity: ServerCapacity | None = None,
) -> ConformanceReport:
    """Run checks in order against url; the report lists them by checklist number. `server_capacity` reads what each
    server of the pool behind the URL holds, when it is envhub's own endpoint."""
    checked_at = datetime.now(UTC)
    started = time.perf_counter()
    ctx = Context(url, outbound, timeout_s=timeout_s, deadline_s=deadline_s, server_capacity=server_capacity)
    results: list[CheckResult] = []
    try:
        for check in checks:
            results.append(await _run_one(ctx, check))
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
    return ConformanceReport(
        url=ctx.base,
        checked_at=checked_at,
        seconds=round(time.perf_counter() - started, 3),
        profile=profile,
        checks=tuple(sorted(results, key=lambda r: _order(r.id))),
    )
