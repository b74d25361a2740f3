"""Search results as cards: emoji, title, author, likes, tags, short description, badges."""

import html
from collections.abc import Sequence
from typing import NamedTuple

from catalog.models import BoardSummary, EnvironmentPublic, QualitySummary, Source, Verdict
from catalog.search import TASK_TAGS, TOOL_TAGS

_STAGES = {
    "RUNNING": ("Running", "ok"),
    "RUNNING_BUILDING": ("Running", "ok"),
    "SLEEPING": ("Sleeping", "idle"),
    "PAUSED": ("Paused", "idle"),
    "STOPPED": ("Stopped", "idle"),
    "BUILDING": ("Building", "busy"),
    "APP_STARTING": ("Starting", "busy"),
    "RUNNING_APP_STARTING": ("Starting", "busy"),
    "BUILD_ERROR": ("Build error", "bad"),
    "CONFIG_ERROR": ("Config error", "bad"),
    "RUNTIME_ERROR": ("Runtime error", "bad"),
    "NO_APP_FILE": ("No app", "bad"),
}
_SOURCES = {Source.HUB: "Hub Space", Source.TEMPLATE: "Built-in", Source.URL: "URL"}
_VERDICTS = {Verdict.PASS: "ok", Verdict.WARN: "busy", Verdict.FAIL: "bad"}
MAX_TAGS = 5


class Badge(NamedTuple):
    """A badge's text, its kind (ok, idle, busy, bad or info: the colour) and what hovering it says."""

    text: str
    kind: str
    title: str = ""


def badges(environment: EnvironmentPublic, launched: str | None = None) -> list[Badge]:
    found = [Badge(_SOURCES.get(environment.source, str(environment.source)), "info")]
    if environment.runtime_stage:
        found.append(Badge(*_STAGES.get(environment.runtime_stage, (environment.runtime_stage.title(), "info"))))
    if launched:
        running = launched == "running"
        found.append(Badge("Launched here", "ok") if running else Badge("Launching", "busy"))
    tags = set(environment.tags)
    if tags & set(TOOL_TAGS):
        found.append(Badge("MCP tools", "info"))
    if tags & set(TASK_TAGS):
        found.append(Badge("Task API", "info"))
    if environment.quality:
        found.append(quality_badge(environment.quality))
    if environment.board:
        found.append(board_badge(environment.board))
    if environment.problems:
        count = len(environment.problems)
        found.append(Badge(f"{count} problem{'s' if count != 1 else ''}", "bad"))
    return found


def quality_badge(summary: QualitySummary) -> Badge:
    """The last quality report's verdict; hovering it names the checks that failed or could not run."""
    checked = f"quality report of {summary.checked_at:%Y-%m-%d}" + (
        f" on {summary.revision[:7]}" if summary.revision else ""
    )
    if summary.failing:
        said = f"{checked}: failing {', '.join(summary.failing)}"
    elif summary.skipped:
        said = f"{checked}: {summary.skipped} check{'s' if summary.skipped != 1 else ''} skipped"
    else:
        said = f"{checked}: every check passed"
    return Badge(f"Quality: {summary.verdict.value}", _VERDICTS[summary.verdict], said[0].upper() + said[1:])


def board_badge(summary: BoardSummary) -> Badge:
    """The newest finished board submission: its verdict, or that it could not be checked."""
    said = f"Board submission {summary.submission} of {summary.revision[:7]}, {summary.finished_at:%Y-%m-%d}"
    if summary.verdict is None:
        return Badge("Board: failed", "bad", f"{said}: a stage could not run")
    signal = f"training signal {summary.training_signal:.2f}" if summary.training_signal is not None else ""
    return Badge(
        f"Board: {summary.verdict.value}", _VERDICTS[summary.verdict], f"{said}" + (f": {signal}" if signal else "")
    )


def badges_html(found: Sequence[Badge]) -> str:
    return "".join(
        f'<span class="badge badge-{b.kind}"'
        + (f' title="{html.escape(b.title, quote=True)}"' if b.title else "")
        + f">{html.escape(b.text)}</span>"
        for b in found
    )


def card_html(environment: EnvironmentPublic, launched: str | None = None) -> str:
    e = environment
    emoji = html.escape(e.emoji or "🧩")
    author = f"by {html.escape(e.author)} · " if e.author else ""
    tags = "".join(
        # a span, not a button: the card is a link, which holds no interactive element
        f'<span class="tag" role="button" data-tag="{html.escape(t, quote=True)}" title="filter by this tag">'
        f"{html.escape(t)}</span>"
        for t in e.tags[:MAX_TAGS]
        if t != "openenv"
    )
    description = html.escape(e.description or "No description.")
    return (
        f'<a class="env-card" href="?env={html.escape(e.id, quote=True)}" data-env="{html.escape(e.id, quote=True)}">'
        f'<div class="env-card-head"><span class="env-emoji">{emoji}</span>'
        f'<span class="env-title">{html.escape(e.title)}</span></div>'
        f'<div class="env-meta">{author}♥ {e.likes:,} · <code>{html.escape(e.id)}</code></div>'
        f'<p class="env-desc">{description}</p>'
        f'<div class="env-badges">{badges_html(badges(e, launched))}</div>'
        f'<div class="env-tags">{tags}</div>'
        "</a>"
    )


def results_html(
    environments: Sequence[EnvironmentPublic], launched: dict[str, str], query: str, indexed: str = ""
) -> str:
    """The cards; none found says what the search ran over (`indexed`, a sentence)."""
    if not environments:
        return empty_state(query, indexed)
    cards = "".join(card_html(e, launched.get(e.id)) for e in environments)
    return f'<div class="env-grid">{cards}</div>'


def empty_state(query: str, indexed: str = "") -> str:
    said = f" for <b>{html.escape(query)}</b>" if query.strip() else ""
    return (
        '<div class="empty-state"><div class="empty-emoji">🔍</div>'
        f"<p>No environments found{said}.</p>"
        + (f'<p class="indexed">{html.escape(indexed)}</p>' if indexed else "")
        + "<p>Try fewer words or filters, or clear the search to see everything.</p></div>"
    )


def summary(count: int, offset: int, shown: int) -> str:
    if count == 0:
        return "No environments"
    noun = "environment" if count == 1 else "environments"
    return f"{count:,} {noun} · showing {offset + 1:,}–{offset + shown:,}"


def pages(count: int, page_size: int) -> int:
    return max(1, -(-count // page_size))
