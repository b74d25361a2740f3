"""The Quality tab's part for openenv's own validator: the newest report check by check (status, evidence,
remediation), its verdict, policy and openenv versions and revision, the URL report beside it, and older reports
one click away."""

import html
import json
from typing import Any

from sqlmodel import Session

from catalog.models import EnvironmentDetail
from conformance.models import ValidatorReportPublic, ValidatorSuite
from conformance.validator import list_validations

_STATUSES = {"pass": "ok", "warn": "warn", "fail": "bad", "error": "bad", "skip": "idle"}
_SHOWN = 20  # older reports listed


def _e(value: object) -> str:
    return html.escape(str(value))


def validation_html(session: Session, environment: EnvironmentDetail) -> str:
    """What openenv's validator said of the environment, newest first, or how to have it run."""
    filed, _ = list_validations(session, environment.id, limit=_SHOWN)
    intro = (
        "<h3>OpenEnv's validator</h3><p class=\"muted\">openenv's own <code>openenv validate</code>, run by envhub: "
        "the static level on every new revision by itself; the runtime and semantic levels, and a running server's "
        f"URL, on request (<code>POST /api/environments/{_e(environment.id)}/validation</code> or "
        f"<code>python -m app validate {_e(environment.id)} --level runtime</code>).</p>"
    )
    if not filed:
        return f'<div class="validation">{intro}<p>No report yet.</p></div>'
    newest = {suite: next((r for r in filed if r.suite == suite), None) for suite in ValidatorSuite}
    shown = [r for r in newest.values() if r is not None]
    older = [r for r in filed if r not in shown]
    parts = [_report_html(r, environment.sha) for r in shown]
    if older:
        rows = "".join(
            f'<li><a href="/api/validation/{r.id}" target="_blank">{_e(r.suite)} · {_e(r.verdict)} · revision '
            f"<code>{_e((r.revision or '?')[:12])}</code> · {r.created_at:%Y-%m-%d %H:%M} UTC</a></li>"
            for r in older
        )
        parts.append(f"<details><summary>Older reports ({len(older)})</summary><ul>{rows}</ul></details>")
    return f'<div class="validation">{intro}{"".join(parts)}</div>'


def _report_html(filed: ValidatorReportPublic, current: str | None) -> str:
    report = filed.report
    verdict = filed.verdict or "?"
    revision = (filed.revision or "?")[:12]
    stale = " (an older revision)" if filed.revision and current and filed.revision != current else ""
    what = "Its files" if filed.suite == ValidatorSuite.FOLDER.value else "Its running server"
    policy = f"policy {_e(report['policy_version'])} · " if "policy_version" in report else ""
    head = (
        f'<p class="validation-verdict" data-suite="{_e(filed.suite)}"><b>{what}</b>: '
        f'<span class="badge badge-{_STATUSES.get(verdict, "idle")}">{_e(verdict)}</span> · revision '
        f"<code>{_e(revision)}</code>{stale} · {policy}{_e(filed.tool or '')} · "
        f"{filed.created_at:%Y-%m-%d %H:%M} UTC · "
        f'<a href="/api/validation/{filed.id}" target="_blank">the report as JSON</a></p>'
    )
    if "results" in report:
        rows = [
            (r["check_id"], r["status"], r.get("evidence", []), r.get("measured", {}), r.get("remediation"))
            for r in report["results"]
        ]
    else:  # a URL's running-environment report: criteria that pass or not
        rows = [
            (c.get("id", ""), "pass" if c.get("passed") else "fail", [str(c.get("details") or "")], {}, None)
            for c in report.get("criteria", [])
        ]
    return head + _table(rows)


def _table(rows: list[tuple[str, str, list[str], dict[str, Any], str | None]]) -> str:
    body = "".join(
        f'<tr data-check="{_e(check)}"><td><code>{_e(check)}</code></td>'
        f'<td><span class="badge badge-{_STATUSES.get(status, "idle")}">{_e(status)}</span></td>'
        f"<td>{''.join(f'<div>{_e(line)}</div>' for line in evidence)}{_measured(measured)}</td>"
        f"<td>{_e(remediation or '')}</td></tr>"
        for check, status, evidence, measured, remediation in rows
    )
    return (
        '<table class="schema validation-checks"><thead><tr><th>check</th><th>status</th><th>evidence</th>'
        f"<th>remediation</th></tr></thead><tbody>{body}</tbody></table>"
    )


def _measured(measured: dict[str, Any]) -> str:
    if not measured:
        return ""
    return f"<details><summary>measured</summary><pre>{_e(json.dumps(measured, indent=1, default=str))}</pre></details>"
