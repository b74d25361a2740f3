"""Quality reports: whether an environment can be trusted as a reward signal, beyond the wire protocol.

The checks RFC 008 leaves to a hub (seed control, episode determinism, the state contract, isolation,
termination, well-formed rewards) and a trivial-policy floor run against a base URL (an endpoint's
gateway, so a pool's replicas are what a trainer reaches), followed by operational figures. The report
has the shape of `openenv validate --json` (conformance.quality.report). It never raises for what the
server does: a server that dies mid-report gets `error` results for what was left, and a verdict.
"""

import asyncio
import logging
import time
from datetime import UTC, datetime

from conformance.quality.checks import CHECKS, Check
from conformance.quality.declared import declared
from conformance.quality.episodes import Lost, SessionError
from conformance.quality.figures import measure_figures
from conformance.quality.report import Figures, QualityReport, QualityResult, Severity, Verdict
from conformance.quality.run import Finding, QualityTarget, ReplicaTarget, Run, Seats
from conformance.report import Outcome
from core.errors import SlotsInUseError
from core.outbound import OutboundGuard, OutboundSession
from protocol.health import healthy
from protocol.interface import read_interface
from rollout.harness import Brief

__all__ = [
    "CHECKS",
    "Figures",
    "QualityReport",
    "QualityResult",
    "QualityTarget",
    "ReplicaTarget",
    "Seats",
    "Verdict",
    "check_quality",
]

log = logging.getLogger(__name__)

ALIVE_TIMEOUT_S = 3.0
DEAD_FIX = "the server stopped answering: read its log for the crash or the hang, fix it, and run the report again"


async def _alive(run: Run) -> str | None:
    """None when GET /health answers healthy, else what it got."""
    try:
        fetched = await run.outbound.fetch("GET", run.base + "/health", timeout_s=ALIVE_TIMEOUT_S)
    except Exception as exc:  # refused, reset, timed out: nobody answers
        return f"GET /health failed: {type(exc).__name__} {exc}".strip()
    return None if healthy(fetched) else f"GET /health answered HTTP {fetched.status}, not healthy"


async def _prepare(run: Run) -> None:
    """Health, what the server says about itself and declares, and the first reset's latency."""
    down = await _alive(run)
    if down is not None:
        run.dead = f"the server is not up: {down}"
        return
    run.interface = await read_interface(run.base, run.outbound)
    metadata = run.interface.metadata or {}
    readme = run.target.readme or (
        metadata.get("readme_content") if isinstance(metadata.get("readme_content"), str) else ""
    )
    run.brief = Brief(
        name=str(metadata.get("name") or run.base),
        readme=readme or "",
        action_schema=run.interface.action_schema,
        tools=tuple(run.interface.tools or ()),
    )
    run.declared = declared(run.target.manifest, readme)
    try:
        async with run.session("first reset") as session:
            started = time.perf_counter()
            await session.reset(seed=0, episode_id=run.episode_id("first"))
            run.first_reset_s = time.perf_counter() - started
    except SessionError as exc:
        run.dead = f"the first session failed: {exc}"


def _error(message: str, remediation: str | None = None) -> Finding:
    return Finding(Outcome.ERROR, [message], remediation=remediation)


async def _run_one(run: Run, check: Check) -> tuple[QualityResult, Severity | None]:
    started = time.perf_counter()
    if run.dead is not None:
        finding = _error(f"not run: {run.dead}", DEAD_FIX)
    elif run.remaining() <= 0:
        finding = _error(f"not run: the report's deadline of {run.deadline_s:g} s passed before this check")
    else:
        try:
            async with asyncio.timeout(run.remaining()):
                finding = await check.run(run)
        except SlotsInUseError:
            raise  # not the server's doing: the report stops, and runs another time
        except TimeoutError:
            fix = f"make reset and step answer faster: the whole report has {run.deadline_s:g} s"
            finding = _error("not finished: the report's deadline passed during this check", fix)
        except SessionError as exc:
            down = await _alive(run) if isinstance(exc, Lost) else None
            if down is not None:
                run.dead = f"the server stopped answering during {check.check_id} ({exc}; {down})"
                finding = _error(f"the server stopped answering: {exc}; {down}", DEAD_FIX)
            else:
                finding = _error(f"the check could not go on: {exc}")
        except Exception as exc:
            log.warning("quality check %s of %s raised", check.check_id, run.base, exc_info=True)
            finding = _error(f"the checker failed: {type(exc).__name__}: {exc}")
    result = QualityResult(
        check_id=check.check_id,
        status=finding.status,
        measured=finding.measured,
        evidence=finding.evidence,
        remediation=finding.remediation,
        duration_s=round(time.perf_counter() - started, 4),
    )
    return result, finding.severity


async def check_quality(
    target: QualityTarget, guard: OutboundGuard, *, timeout_s: float = 10, deadline_s: float = 60
) -> QualityReport:
    """Run the quality suite against the target's URL; RefusedURLError when the guard will not fetch it, and
    SlotsInUseError when the target's seats are wanted by the pool's clients (the report is then not finished)."""
    base = guard.normalize(target.url).rstrip("/")
    checked_at = datetime.now(UTC)
    started = time.perf_counter()
    outbound = OutboundSession(guard, timeout_s=timeout_s)
    try:
        await outbound.pin(base)  # refuse before anything runs; every request then goes to this address
        run = Run(target, base, guard, outbound, timeout_s=timeout_s, deadline_s=deadline_s)
        try:
            async with asyncio.timeout(max(run.remaining(), 0.01)):
                await _prepare(run)
        except TimeoutError:
            run.dead = f"the server did not answer its first requests within the report's deadline of {deadline_s:g} s"
        ran = [await _run_one(run, check) for check in CHECKS]
        figures = await measure_figures(run)
    finally:
        await outbound.aclose()
    return QualityReport(
        target=base,
        environment=target.environment,
        revision=target.revision,
        checked_at=checked_at,
        duration_s=round(time.perf_counter() - started, 3),
        results=tuple(result for result, _ in ran),
        severities={result.check_id: severity or Severity.FAIL for result, severity in ran},
        figures=figures,
    )
