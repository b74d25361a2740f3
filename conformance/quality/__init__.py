"""The hub lane's report: what openenv's validator leaves to a hub, run against a base URL (an endpoint's gateway,
so a pool's replicas are what a trainer reaches), followed by operational figures.

The checks are in conformance.quality.checks and run through the engine (conformance.engine); the report is a
`conformance.report.Report` of suite `quality`. It never raises for what the server does: a server that dies
mid-report gets `error` results for what was left, and a verdict.
"""

import asyncio
import time
from datetime import UTC, datetime

from conformance.engine import run_checks
from conformance.quality.checks import CHECKS
from conformance.quality.figures import measure_figures
from conformance.quality.run import QualityTarget, ReplicaTarget, Run, Seats
from conformance.report import Report, Suite
from core.outbound import OutboundGuard, OutboundSession
from envclient.interface import read_interface
from envclient.ws import SessionError
from rollout.harness import Brief

__all__ = ["CHECKS", "QualityTarget", "ReplicaTarget", "Seats", "check_quality"]


async def _prepare(run: Run) -> None:
    """Health, what the server says about itself and declares, and the first reset's latency."""
    down = await run.alive()
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
    try:
        async with run.session() as session:
            started = time.perf_counter()
            await session.reset(seed=0, episode_id=run.episode_id("first"))
            run.first_reset_s = time.perf_counter() - started
            budget = (await session.state()).get("max_steps")
            if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0:
                run.state_max_steps = budget
    except SessionError as exc:
        run.dead = f"the first session failed: {exc}"


async def check_quality(
    target: QualityTarget, guard: OutboundGuard, *, timeout_s: float = 10, deadline_s: float = 60
) -> Report:
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
        results = await run_checks(run, CHECKS)
        figures = await measure_figures(run)
    finally:
        await outbound.aclose()
    return Report(
        suite=Suite.QUALITY,
        target=base,
        environment=target.environment,
        revision=target.revision,
        checked_at=checked_at,
        duration_s=round(time.perf_counter() - started, 3),
        results=tuple(results),
        figures=figures,
    )
