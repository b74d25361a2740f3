"""The environment page's Quality section: the last quality report's verdict, each check with its evidence and
remediation, and the operational figures; or how to get a report when there is none."""

import asyncio
import html
import json
from typing import Any

import gradio as gr
from sqlalchemy import Engine
from sqlmodel import Session

from app.ui.cards import badges_html, quality_badge
from app.ui.requests import Visitors, connection_of
from app.urls import own_gateway
from app.usecases.quality import hosted
from app.usecases.your_endpoint import reusable
from catalog.models import EnvironmentDetail, Source
from catalog.store import find_environment, read_environment
from conformance.checker import Checker, list_reports
from conformance.engine import CheckResult, Outcome
from conformance.models import CheckReportPublic, Suite
from conformance.report import Figures
from core.errors import EnvhubError
from core.sealing import EndpointTokens
from hosting.endpoints import EndpointManager
from hosting.models import EndpointStatus

_OUTCOMES = {Outcome.PASS: "ok", Outcome.FAIL: "bad", Outcome.SKIP: "idle", Outcome.ERROR: "bad"}


def _e(value: object) -> str:
    return html.escape(str(value))


def latest_report(session: Session, environment_id: str) -> CheckReportPublic | None:
    """The environment's last filed quality report, whose summary its row carries."""
    found, _ = list_reports(session, environment=environment_id, suite=Suite.QUALITY, limit=1)
    return found[0] if found and isinstance(found[0], CheckReportPublic) else None


def quality_html(environment: EnvironmentDetail, filed: CheckReportPublic | None) -> str:
    summary = environment.quality
    if summary is None:
        return (
            '<div class="quality"><p>No quality report yet. A report plays seeded episodes against a running '
            "server and says whether it can be trusted as a reward signal (RFC 008's checks): press <b>Run a "
            "quality report</b> (on your running endpoint of it, or its Space), or run "
            "<code>python -m app check URL --suite quality</code>.</p></div>"
        )
    revision = f" on revision <code>{_e(summary.revision[:12])}</code>" if summary.revision else ""
    newer = (
        f'<p class="muted">The catalog has a newer revision, <code>{_e(environment.sha[:12])}</code>: this report '
        "is of the one before.</p>"
        if summary.revision and environment.sha and environment.sha != summary.revision
        else ""
    )
    counts = f"{summary.passed} passed, {summary.failed} failed, {summary.skipped} skipped, {summary.errors} errors"
    head = (
        f'<p class="quality-verdict">{badges_html([quality_badge(summary)])} '
        f"checked {summary.checked_at:%Y-%m-%d %H:%M} UTC{revision} · {_e(counts)}</p>{newer}"
    )
    if filed is None:
        return f'<div class="quality">{head}<p class="muted">The full report is not stored here.</p></div>'
    report = filed.report
    link = f'<p class="muted">Against <code>{_e(report.target)}</code> in {report.duration_s:.1f} s · '
    link += f'<a href="/api/checks/{filed.id}" target="_blank">the report as JSON</a></p>'
    return f'<div class="quality">{head}{link}{_results(report.results)}{_figures(report.figures or Figures())}</div>'


def _results(results: tuple[CheckResult, ...]) -> str:
    rows = "".join(
        f'<tr data-check="{_e(r.check_id)}"><td><code>{_e(r.check_id)}</code></td>'
        f'<td><span class="badge badge-{_OUTCOMES[r.status]}">{_e(r.status.value)}</span></td>'
        f"<td>{''.join(f'<div>{_e(line)}</div>' for line in r.evidence)}{_measured(r.measured)}</td>"
        f"<td>{_e(r.remediation or '')}</td></tr>"
        for r in results
    )
    return (
        '<table class="schema quality-checks"><thead><tr><th>check</th><th>status</th><th>evidence</th>'
        f"<th>remediation</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _measured(measured: dict[str, Any]) -> str:
    if not measured:
        return ""
    shown = json.dumps(measured, indent=1, default=str)
    return f"<details><summary>measured</summary><pre>{_e(shown)}</pre></details>"


def _figures(figures: Figures) -> str:
    rows = []
    if figures.cold_start_s is not None:
        rows.append(("Cold start", f"{figures.cold_start_s:.2f} s (from the {figures.cold_start_from or 'start'})"))
    for sessions, rate in figures.steps_per_s.items():
        rows.append((f"Steps per second, {sessions} session{'s' if sessions != '1' else ''}", f"{rate:,.0f}"))
    if figures.capacity is not None:
        bound = "" if figures.capacity_reached else " or more (the probe's bound)"
        rows.append(("Sessions at once", f"{figures.capacity}{bound}"))
    if figures.memory_per_session_mb is not None:
        rows.append(("Memory per session", f"{figures.memory_per_session_mb:.1f} MB"))
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    notes = "".join(f'<p class="muted">{_e(note)}</p>' for note in figures.notes)
    return f'<h3>Operational figures</h3><table class="kv quality-figures">{body}</table>{notes}'


async def run_report(
    engine: Engine,
    endpoints: EndpointManager,
    checker: Checker,
    tokens: EndpointTokens,
    visitors: Visitors,
    environment_id: str,
    request: gr.Request,
) -> str:
    """Run a quality report now, on the caller's running endpoint of the environment or on its Space's host, file
    it, and answer the Quality section as it then reads; or say what to do first."""
    environment = await read_environment(engine, environment_id) if environment_id else None
    if environment is None:
        return '<p class="problem">Open an environment first.</p>'
    caller = await asyncio.to_thread(visitors.acting_caller, request)
    endpoint = await reusable(endpoints, caller, environment)
    connection = connection_of(request)
    try:
        if endpoint is not None and endpoint.status == EndpointStatus.RUNNING and connection is not None:
            url = own_gateway(connection, endpoint.id)
            known = await asyncio.to_thread(hosted, endpoints, endpoint)
            await checker.check_quality(
                url,
                environment=endpoint.environment,
                endpoint=endpoint.id,
                revision=endpoint.revision,
                trusted=(url,),
                credentials=tokens.header(endpoint.id),
                **known,
            )
        elif environment.host and environment.source != Source.TEMPLATE:
            await checker.check_quality(environment.host, environment=environment.id)
        else:
            return (
                '<p class="problem">It runs nowhere yet: a report plays episodes against a running server. Press '
                "<b>Launch locally</b> in Play, then run the report.</p>"
            )
    except EnvhubError as exc:
        return f'<p class="problem">No report: {_e(exc.message)}</p>'

    def read() -> str:
        with Session(engine) as session:
            environment = find_environment(session, environment_id)
            filed = latest_report(session, environment_id)
        return quality_html(environment, filed) if environment is not None else ""

    return await asyncio.to_thread(read)
