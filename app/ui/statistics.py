"""The Quality tab's statistical part (does it teach?): run the lane on the caller's running endpoint with the model
presets they pick, and read the newest report check by check (status, what it measured with its intervals, the
remediation, the evidence's episodes as links to the episode viewer), each player's figures and each task's
difficulty."""

import asyncio
import html
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import gradio as gr
from sqlalchemy import Engine
from sqlmodel import Session, col, select

from app.ui.requests import Visitors, connection_of
from app.urls import own_gateway
from app.usecases.statistics import Statistics, StatisticsRequest
from app.usecases.your_endpoint import reusable
from catalog.store import read_environment
from conformance.checker import list_reports
from conformance.engine import CheckResult
from conformance.models import CheckReportPublic
from conformance.report import Report, RunStatus, Suite
from conformance.statistical.exports import band
from conformance.statistical.models import TaskDifficulty
from core.errors import EnvhubError
from evals.presets import preset_owner
from hosting.models import EndpointStatus

__all__ = ["StatisticsPanel", "build", "latest_html", "presets_update", "run", "statistics_html"]

_STATUS = {"pass": "ok", "fail": "bad", "skip": "idle", "error": "bad"}


def _e(value: object) -> str:
    return html.escape(str(value))


@dataclass(frozen=True)
class StatisticsPanel:
    presets: gr.Dropdown
    run: gr.Button
    report: gr.HTML


def build() -> StatisticsPanel:
    """Its controls and its report, under the quality report in the Quality tab."""
    gr.Markdown("### Does it teach? The statistical lane")
    with gr.Row(equal_height=True):
        presets = gr.Dropdown(
            [], value=[], multiselect=True, label="Model presets to play (k samples a task)", scale=3,
            elem_id="statistical-presets",
        )  # fmt: skip
        run_button = gr.Button("▶ Run a statistical report", size="sm", scale=1, elem_id="statistical-run")
    report = gr.HTML(elem_id="env-statistical")
    return StatisticsPanel(presets, run_button, report)


def presets_update(statistics: Statistics, visitors: Visitors, request: gr.Request | None) -> Any:
    """The caller's own model presets (the local ones without sign-in), to pick from."""
    evaluator = statistics.evaluator
    try:
        owner = preset_owner(visitors.caller(request), evaluator.endpoints.access)
    except EnvhubError:
        return gr.Dropdown(choices=[], value=[])  # not signed in where sign-in is on: nothing saved
    return gr.Dropdown(choices=[p.name for p in evaluator.presets.list(owner)], value=[])


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, int | float) for v in value):
        return f"[{value[0]:.3g}, {value[1]:.3g}]"
    return _e(value)


def _measured(measured: dict[str, Any]) -> str:
    """The figures (numbers and intervals) a check measured; its episode and evaluation ids are the links."""
    shown = [
        f"<span><b>{_e(k)}</b> {_number(v)}</span>"
        for k, v in measured.items()
        if k not in ("episodes", "evaluations", "per_task", "means")
        and (isinstance(v, int | float) or (isinstance(v, list | tuple) and len(v) == 2))
    ]
    means = measured.get("means")
    if isinstance(means, dict):
        shown += [f"<span><b>{_e(k)}</b> {_number(v)}</span>" for k, v in means.items()]
    return f'<div class="statistical-measured">{" · ".join(shown)}</div>' if shown else ""


def _episodes(measured: dict[str, Any]) -> str:
    episodes = [e for e in measured.get("episodes") or [] if isinstance(e, str)]
    links = " ".join(
        f'<a class="statistical-episode" href="/?episode={_e(e)}" target="_blank">{_e(e)}</a>' for e in episodes
    )
    return f'<div class="muted">replay: {links}</div>' if links else ""


def _checks(results: Sequence[CheckResult]) -> str:
    rows = "".join(
        f'<tr data-check="{_e(r.check_id)}"><td><code>{_e(r.check_id)}</code></td>'
        f'<td><span class="badge badge-{_STATUS[r.status.value]}">{_e(r.status.value)}</span></td>'
        f"<td>{''.join(f'<div>{_e(line)}</div>' for line in r.evidence)}{_measured(r.measured)}"
        f"{_episodes(r.measured)}</td><td>{_e(r.remediation or '')}</td></tr>"
        for r in results
    )
    return (
        '<table class="schema statistical-checks"><thead><tr><th>check</th><th>status</th><th>measured</th>'
        f"<th>remediation</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _players(report: Report) -> str:
    def mean(p: Any) -> str:
        return "-" if p.mean_reward is None else f"{p.mean_reward:.3f} ± {p.se or 0:.3f}"

    rows = "".join(
        f'<tr data-player="{_e(p.label)}"><td>{_e(p.label)}</td><td>{_e(p.kind)}</td><td>{p.episodes}</td>'
        f"<td>{mean(p)}</td><td>{'-' if p.pass_rate is None else f'{p.pass_rate:.2f}'} "
        f"[{p.pass_interval[0]:.2f}, {p.pass_interval[1]:.2f}]</td><td><code>{_e(p.evaluation)}</code></td></tr>"
        for p in (report.statistics.players if report.statistics is not None else ())
    )
    return (
        '<h4>Players</h4><table class="schema statistical-players"><thead><tr><th>player</th><th>kind</th>'
        "<th>episodes</th><th>mean reward ± SE</th><th>pass rate [Wilson 95 %]</th><th>evaluation</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _difficulty(rows: Sequence[TaskDifficulty]) -> str:
    if not rows:
        return ""

    def mean(row: TaskDifficulty) -> str:
        return "-" if row.mean_reward is None else f"{row.mean_reward:.3f} ± {row.se or 0:.3f}"

    body = "".join(
        f'<tr data-task="{_e(r.task)}"><td><code>{_e(r.task)}</code></td><td>{r.passes}/{r.samples}</td>'
        f"<td>{'-' if r.pass_at_k is None else f'{r.pass_at_k:.2f}'}</td><td>{mean(r)}</td>"
        f"<td>{r.p_signal:.3f} [{r.p_signal_low:.3f}, {r.p_signal_high:.3f}]</td><td>{band(r)}</td></tr>"
        for r in rows
    )
    head = f"<h4>Difficulty per task, for <code>{_e(rows[0].player)}</code> (G = {rows[0].group_size})</h4>"
    return (
        f'{head}<table class="schema statistical-tasks"><thead><tr><th>task</th><th>passed</th>'
        f"<th>pass@{rows[0].k}</th><th>mean reward ± SE</th><th>P(signal) [95 %]</th><th>band</th></tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


def statistics_html(filed: CheckReportPublic | None, difficulty: Sequence[TaskDifficulty]) -> str:
    if filed is None:
        return (
            '<div class="statistical"><p class="muted">No statistical report yet. It plays your running endpoint with '
            "reference players (random, first-legal, an adversarial panel, the model presets you pick) and says "
            "whether the environment gives a training signal: press <b>Run a statistical report</b>, or run "
            "<code>python -m app statistics ENVIRONMENT</code>.</p></div>"
        )
    report = filed.report
    if report.status == RunStatus.RUNNING:
        return f'<div class="statistical"><p class="muted">Statistical report {filed.id} is under way…</p></div>'
    verdict = report.verdict.value if report.verdict is not None else "none"
    failed = f" · failed ({_e(report.code)}): {_e(report.message)}" if report.status == RunStatus.FAILED else ""
    policy = report.statistics.policy_version if report.statistics is not None else "no gate policy"
    head = (
        f'<p class="statistical-verdict"><span class="badge badge-{_STATUS.get(verdict, "idle")}">Teaches: '
        f"{_e(verdict)}</span> under <code>{_e(policy)}</code>, {report.checked_at:%Y-%m-%d %H:%M} "
        f"UTC, in {report.duration_s:.1f} s{failed} · "
        f'<a href="/api/statistics/{filed.id}" target="_blank">the report as JSON</a></p>'
    )
    return f'<div class="statistical">{head}{_checks(report.results)}{_players(report)}{_difficulty(difficulty)}</div>'


def latest_html(engine: Engine, environment_id: str) -> str:
    """The environment's newest statistical report, with its tasks' difficulty."""
    with Session(engine) as session:
        found, _ = list_reports(session, environment=environment_id, suite=Suite.STATISTICAL, limit=1)
        filed = next((r for r in found if isinstance(r, CheckReportPublic)), None)
        rows = (
            list(session.execute(select(TaskDifficulty).where(col(TaskDifficulty.report) == filed.id)).scalars())
            if filed is not None
            else []
        )
    return statistics_html(filed, rows)


async def run(
    engine: Engine,
    statistics: Statistics,
    visitors: Visitors,
    environment_id: str,
    presets: list[str],
    request: gr.Request,
) -> AsyncIterator[str]:
    """Start a report on the caller's running endpoint of the environment, then show it once it has ended."""
    environment = await read_environment(engine, environment_id) if environment_id else None
    if environment is None:
        yield '<p class="problem">Open an environment first.</p>'
        return
    caller = await asyncio.to_thread(visitors.acting_caller, request)
    endpoint = await reusable(statistics.evaluator.endpoints, caller, environment)
    connection = connection_of(request)
    if endpoint is None or endpoint.status != EndpointStatus.RUNNING or connection is None:
        yield (
            '<p class="problem">It runs nowhere of yours yet: the players play a running endpoint. Press '
            "<b>Launch locally</b> in Play, then run the report.</p>"
        )
        return
    try:
        body = StatisticsRequest(endpoint=endpoint.id, presets=presets or [])
        filed = await statistics.start(body, caller, lambda endpoint_id: own_gateway(connection, endpoint_id))
    except EnvhubError as exc:
        yield f'<p class="problem">No report: {_e(exc.message)}</p>'
        return
    yield statistics_html(filed, [])
    await statistics.ended(filed.id)
    yield await asyncio.to_thread(latest_html, engine, environment.id)
