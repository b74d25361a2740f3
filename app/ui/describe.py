"""The detail page's HTML: header with links and badges, status, and the environment's
API (action and observation schemas, MCP tools, Task API splits) as readable tables."""

import html
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from app.ui.cards import badges, badges_html
from app.ui.schemas import SchemaRow, schema_rows
from catalog.models import EnvironmentDetail, EnvironmentPublic, Source
from catalog.space_health import is_waking
from envclient.interface import Interface


def _e(value: object) -> str:
    return html.escape(str(value))


def space_url(hf_endpoint: str, environment: EnvironmentDetail) -> str | None:
    if environment.source != Source.HUB:
        return None
    return f"{hf_endpoint.rstrip('/')}/spaces/{environment.id}"


def readme_base(hf_endpoint: str, environment: EnvironmentDetail) -> str | None:
    """Where a Space's README's relative links and images point to."""
    url = space_url(hf_endpoint, environment)
    return f"{url}/resolve/main/" if url else None


def revision_notes(environment: EnvironmentDetail, serving: dict[str, str]) -> list[str]:
    """What the page says of revisions: a pinned one that is not the catalog's, endpoints that serve an older one.

    serving: endpoint id -> the revision it serves, of the environment's running endpoints.
    """
    e, notes = environment, []
    if e.latest and e.sha:
        notes.append(
            f"This page is pinned to revision <code>{_e(e.sha[:12])}</code>; the catalog has a newer one, "
            f'<a href="?env={_e(e.id)}"><code>{_e(e.latest[:12])}</code></a>. Its card, schema and tools are the newer '
            "revision's; a launch from here runs the pinned one."
        )
    current = e.latest or e.sha
    for endpoint, revision in sorted(serving.items()):
        if current and revision != current:
            notes.append(
                f"Endpoint <code>{_e(endpoint)}</code> serves revision <code>{_e(revision[:12])}</code>; the catalog "
                f"has a newer one, <code>{_e(current[:12])}</code>. Its URL keeps serving its own."
            )
    return notes


def header_html(
    environment: EnvironmentDetail, hf_endpoint: str, launched: str | None = None, serving: dict[str, str] | None = None
) -> str:
    """serving: endpoint id -> the revision it serves, of the environment's running endpoints."""
    e, serving = environment, serving or {}
    public = EnvironmentPublic.model_validate(e.model_dump())
    links = []
    space = space_url(hf_endpoint, e)
    if space:
        links.append(f'<a href="{_e(space)}" target="_blank" rel="noopener noreferrer">Space on the Hub ↗</a>')
    for dataset in e.datasets:
        url = f"{hf_endpoint.rstrip('/')}/datasets/{dataset}"
        links.append(f'<a href="{_e(url)}" target="_blank" rel="noopener noreferrer">dataset {_e(dataset)} ↗</a>')
    pinned = f"{e.id}@{e.sha}" if e.sha else e.id  # a shared link names the revision it showed
    links.append(f'<a href="?env={_e(pinned)}" class="share-link">Share link</a>')
    revision = f"@{_e(e.sha[:12])}" if e.sha else ""
    meta = [f"by <b>{_e(e.author)}</b>" if e.author else "", f"♥ {e.likes:,}", f"<code>{_e(e.id)}{revision}</code>"]
    if e.license:
        meta.append(f"license {_e(e.license)}")
    if e.last_modified:
        meta.append(f"updated {_e(_date(e.last_modified))}")
    tags = "".join(f'<span class="tag">{_e(t)}</span>' for t in e.tags if t != "openenv")
    problems = "".join(f"<li>{_e(p)}</li>" for p in e.problems)
    return (
        '<div class="env-header">'
        f'<h1><span class="env-emoji">{_e(e.emoji or "🧩")}</span> {_e(e.title)}</h1>'
        f'<p class="env-meta">{" · ".join(m for m in meta if m)}</p>'
        f'<p class="env-description">{_e(e.description or "No description.")}</p>'
        f'<div class="env-badges">{badges_html(badges(public, launched))}</div>'
        f'<div class="env-tags">{tags}</div>'
        f'<p class="env-links">{" · ".join(links)}</p>'
        + "".join(f'<p class="muted revision-note">{note}</p>' for note in revision_notes(e, serving))
        + (
            f'<details class="problems"><summary>Problems found while indexing</summary><ul>{problems}</ul></details>'
            if problems
            else ""
        )
        + "</div>"
    )


def _date(value: datetime) -> str:
    return value.strftime("%Y-%m-%d")


def as_dict(value: Any) -> dict[str, Any]:
    """A cached record (a model or its JSON) as a dict."""
    if hasattr(value, "model_dump"):
        dumped: dict[str, Any] = value.model_dump(mode="json")
        return dumped
    return value if isinstance(value, dict) else {}


def status_html(environment: EnvironmentDetail, live_url: str | None, serving: str | None = None) -> str:
    """Runtime stage (`serving`: what the newest running endpoint runs on, e.g. "process endpoint 3f9c1a2b7d"), the
    health monitor's view and conformance, when known."""
    stage = environment.runtime_stage or ("local template" if environment.path else "unknown")
    rows = [("Runtime", serving or stage)]
    rows.append(("Live URL", live_url or "none yet: launch it"))
    health = as_dict(environment.health)
    if health:
        status = str(health.get("status") or "unknown")
        latency = health.get("health_ms")
        note = f", GET /health {latency:.0f} ms" if isinstance(latency, int | float) else ""
        rows.append(("Health", status + note + (f" ({health['message']})" if health.get("message") else "")))
    conformance = as_dict(environment.conformance)
    if conformance:
        passed, total = conformance.get("core_passed"), conformance.get("core_total")
        verdict = "conforms" if conformance.get("conforms") else "does not conform"
        rows.append(("Conformance", verdict + (f" ({passed}/{total} core checks)" if total else "")))
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    waking = (
        "<p>Waking the Space. A Space takes a minute or so to start; its health reads <em>up</em> here once "
        "it answers (reopen the page to see it).</p>"
        if is_waking(environment.health)
        else ""
    )
    return f'<table class="kv">{body}</table>{waking}'


def rows_table(rows: Sequence[SchemaRow]) -> str:
    if not rows:
        return '<p class="muted">No fields.</p>'
    body = "".join(
        f"<tr><td><code>{_e(r.name)}</code>{' <span class=req>required</span>' if r.required else ''}</td>"
        f"<td>{_e(r.type)}</td><td>{_e(r.default)}</td><td>{_e(r.description)}</td></tr>"
        for r in rows
    )
    return (
        '<table class="schema"><thead><tr><th>field</th><th>type</th><th>default</th><th>description</th></tr>'
        f"</thead><tbody>{body}</tbody></table>"
    )


def api_html(info: Interface, *, reading: bool = False) -> str:
    """Schemas, tools and tasks; what is unknown says how to learn it, or that it is being read (`reading`)."""
    parts = []
    schema = info.schema or {}
    if not schema and reading:
        parts.append('<p class="muted" data-reading="schemas">Reading the schemas …</p>')
    elif not schema:
        hint = "Launch the environment (or connect to a running one) to read its schemas."
        parts.append(f'<p class="muted">{_e(hint)}</p>')
    for key, title in (("action", "Action"), ("observation", "Observation"), ("state", "State")):
        if isinstance(schema.get(key), dict):
            described = schema[key].get("description") or schema[key].get("title") or ""
            parts.append(f"<h3>{title}</h3><p class=muted>{_e(described)}</p>{rows_table(schema_rows(schema[key]))}")
    if info.tools:
        parts.append(f"<h3>MCP tools ({len(info.tools)})</h3>")
        for tool in info.tools:
            parts.append(
                f'<div class="tool"><h4><code>{_e(tool.name)}</code></h4><p>{_e(tool.description)}</p>'
                f"{rows_table(schema_rows(tool.input_schema))}</div>"
            )
    if info.splits:
        body = "".join(
            f"<tr><td><code>{_e(s.name)}</code></td><td>{_e(s.type)}</td>"
            f"<td>{'' if s.count is None else f'{s.count:,}'}</td></tr>"
            for s in info.splits
        )
        parts.append(
            f"<h3>Task API: <code>{_e(info.task_env or '')}</code></h3>"
            '<table class="schema"><thead><tr><th>split</th><th>type</th><th>tasks</th></tr></thead>'
            f"<tbody>{body}</tbody></table>"
        )
    for problem in info.problems:
        parts.append(f'<p class="problem">{_e(problem)}</p>')
    return '<div class="api">' + "".join(parts) + "</div>"
