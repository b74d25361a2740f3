"""What python -m app check runs: a URL against the OpenEnv protocol, or a quality report of it, as a table or JSON."""

import argparse
import asyncio
import sys

from app.settings import Settings
from conformance import Outcome, Report, check_url, unreachable
from conformance.engine import Verdict
from conformance.quality import QualityTarget, check_quality
from conformance.report import Figures, ServerProfile
from core.errors import RefusedURLError
from core.outbound import OutboundGuard

_MARKS = {Outcome.PASS: "pass", Outcome.FAIL: "FAIL", Outcome.SKIP: "skip", Outcome.ERROR: "ERROR"}


def print_report(report: Report) -> None:
    """The report as a table a person reads: one line per check, the reason under each that did not pass."""
    profile = report.profile or ServerProfile()
    facts = [f"openenv {profile.generation}" if profile.generation == "0.10" else "an older openenv server"]
    if profile.mode:
        facts.append(f"{profile.mode} mode")
    if profile.mcp_tools:
        facts.append(f"{profile.mcp_tools} MCP tools")
    if profile.env_name:
        facts.append(f"Task API name {profile.env_name!r}")
    print(f"{report.target}: {', '.join(facts)}\n")
    print(f"{'#':<4} {'level':<5} {'result':<6} {'ms':>7}  check")
    for check in report.results:
        ms = check.duration_s * 1000
        print(f"{check.check_id:<4} {check.level.value:<5} {_MARKS[check.status]:<6} {ms:>7.0f}  {check.title}")
        if check.status != Outcome.PASS and check.message:
            print(f"{'':<26}↳ {check.message}")
    skipped = sum(c.status == Outcome.SKIP for c in report.results)
    verdict = "conforms" if report.conforms else "does NOT conform"
    print(
        f"\n{verdict}: {report.core_passed}/{report.core_total} core checks passed, {len(report.warnings)} warnings, "
        f"{skipped} skipped, in {report.duration_s:.1f} s"
    )


def _figures(figures: Figures) -> str:
    parts = []
    if figures.cold_start_s is not None:
        parts.append(f"cold start {figures.cold_start_s:g} s (from the {figures.cold_start_from})")
    for sessions, rate in figures.steps_per_s.items():
        parts.append(f"{rate:g} steps/s at {sessions} session(s)")
    if figures.capacity is not None:
        parts.append(f"{figures.capacity}{'' if figures.capacity_reached else '+'} sessions at once")
    if figures.memory_per_session_mb is not None:
        parts.append(f"{figures.memory_per_session_mb:g} MiB per session")
    return "; ".join(parts) or "none measured"


def print_quality(report: Report) -> None:
    """The quality report as a table: one line per check, its evidence and fix under each that did not pass."""
    print(f"{report.target}: quality report" + (f" of {report.environment}" if report.environment else "") + "\n")
    print(f"{'check':<31} {'result':<6} {'s':>6}  evidence")
    for result in report.results:
        first, *rest = result.evidence or [""]
        print(f"{result.check_id:<31} {_MARKS[result.status]:<6} {result.duration_s:>6.2f}  {first}")
        if result.status != Outcome.PASS:
            for line in rest:
                print(f"{'':<47}{line}")
            if result.remediation:
                print(f"{'':<45}↳ fix: {result.remediation}")
    figures = report.figures or Figures()
    print(f"\nfigures: {_figures(figures)}")
    for note in figures.notes:
        print(f"  {note}")
    print(f"\nverdict: {str(report.verdict).upper()}, in {report.duration_s:.1f} s")


def run_check(settings: Settings, args: argparse.Namespace) -> int:
    # The command runs with its user's own network access, so private addresses are allowed unless asked not to.
    guard = OutboundGuard(allow_private=not args.public_only)
    quality = args.suite == "quality"
    deadline = args.deadline or (60 if quality else 30)
    try:
        absent = asyncio.run(unreachable(args.url, guard, timeout_s=args.timeout))
        if absent is not None:  # one fact, rather than every check failing for it
            print(
                f"envhub: nothing answers at {args.url}: {absent}. Is the server running, at this host and port?",
                file=sys.stderr,
            )
            return 1
        if quality:
            target = QualityTarget(args.url)
            found = asyncio.run(check_quality(target, guard, timeout_s=args.timeout, deadline_s=deadline))
        else:
            report = asyncio.run(check_url(args.url, guard, timeout_s=args.timeout, deadline_s=deadline))
    except RefusedURLError as exc:
        print(f"envhub: {exc.message}", file=sys.stderr)
        return 1
    if args.json:
        print((found if quality else report).model_dump_json(indent=2))
    elif quality:
        print_quality(found)
    else:
        print_report(report)
    if quality:
        return 1 if found.verdict == Verdict.FAIL else 0  # as openenv validate: 0 for pass or warn
    return 0 if report.conforms else 1
