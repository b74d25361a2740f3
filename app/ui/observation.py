"""An observation split into what a person reads: text, Markdown, images, a field table,
legal actions to click, the error to show next to the form, and a JSON tree of the rest."""

import html
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from app.ui.boards import Hints, find_board
from app.ui.readme import render_inline
from protocol.observations import LEGAL_ACTION_KEYS, image_data_uri, refusal


@dataclass(frozen=True)
class Part:
    kind: Literal["text", "markdown", "image", "fields", "board"]
    label: str
    value: Any


@dataclass(frozen=True)
class ObservationView:
    parts: list[Part] = field(default_factory=list)
    legal_actions: list[Any] = field(default_factory=list)
    error: str | None = None
    tree: dict[str, Any] = field(default_factory=dict)


def _is_layout(text: str) -> bool:
    """Multi-line text whose layout matters (a board, a grid, a table): shown monospaced."""
    lines = text.strip("\n").splitlines()
    return len(lines) >= 2


def _tool_result(value: dict[str, Any]) -> list[Part]:
    """An MCP tool result: its text and image content."""
    parts: list[Part] = []
    for item in value.get("content") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "text" and isinstance(item.get("text"), str):
            parts.append(Part("text" if _is_layout(item["text"]) else "markdown", "result", item["text"]))
        elif item.get("type") == "image" and isinstance(item.get("data"), str):
            uri = image_data_uri(item["data"])
            if uri:
                parts.append(Part("image", "result", uri))
    return parts


def observation_view(observation: Any, reset: Any = None, hints: Hints | None = None) -> ObservationView:
    """The observation's readable parts; with the episode's `reset` observation, its text that this one no longer
    carries (a tool environment's question, once a tool's result is all a step returns) comes first. `hints` say how
    its board is played and named."""
    if not isinstance(observation, dict):
        return ObservationView(parts=[Part("text", "observation", json.dumps(observation))])
    parts: list[Part] = []
    if isinstance(reset, dict) and reset is not observation:
        for key, value in reset.items():
            carried = key not in observation and key != "error" and isinstance(value, str) and value.strip()
            if carried and image_data_uri(value) is None:
                parts.append(Part("text" if _is_layout(value) else "markdown", f"{key} (from the reset)", value))
    scalars: dict[str, Any] = {}
    tree: dict[str, Any] = {}
    legal: list[Any] = []
    error = None
    for key, value in observation.items():
        if key == "error":
            error = refusal(observation)
            if value is not None:
                tree[key] = value
            continue
        if key in LEGAL_ACTION_KEYS and isinstance(value, list):
            legal = value
            tree[key] = value
            continue
        if isinstance(value, str):
            uri = image_data_uri(value)
            if uri:
                parts.append(Part("image", key, uri))
                tree[key] = f"<{uri[5 : uri.index(';')]} image, {len(value) * 3 // 4:,} bytes>"
            elif value:
                parts.append(Part("text" if _is_layout(value) else "markdown", key, value))
            continue
        if isinstance(value, dict) and key == "result" and isinstance(value.get("content"), list):
            parts.extend(_tool_result(value))
            tree[key] = value.get("data", value.get("structured_content", value))
            continue
        if value is None or isinstance(value, bool | int | float):
            scalars[key] = value
            continue
        if key == "metadata" and not value:
            continue
        tree[key] = value
    if scalars:
        parts.append(Part("fields", "", scalars))
    board = find_board(observation, hints)
    if board is not None:  # drawn first; what showed it as text stays, folded
        parts.insert(0, Part("board", board.field, board.html))
    return ObservationView(parts=parts, legal_actions=legal, error=error, tree=tree)


_ENCODINGS = {"png", "jpeg", "jpg", "gif", "webp", "base64", "b64", "data", "uri"}


def readable(name: str, *, image: bool = False) -> str:
    """A field's name as a label: 'image_png_base64' -> 'image', 'steps_left' -> 'steps left'."""
    words = name.replace("_", " ").replace("-", " ").split()
    if image:
        words = [w for w in words if w.lower() not in _ENCODINGS] or ["image"]
    return " ".join(words)


def _scalar(value: Any) -> str:
    return html.escape(json.dumps(value))


def render_view(view: ObservationView) -> str:
    """The readable parts as HTML; every string from the environment is escaped or sanitized."""
    chunks = []
    board_field = next((part.label for part in view.parts if part.kind == "board"), None)
    drawn = board_field is not None
    beside: list[str] = []  # a board and the first image, side by side
    for part in view.parts:
        named = readable(part.label, image=part.kind == "image")
        label = f'<div class="obs-label">{html.escape(named)}</div>' if part.label else ""
        alt = html.escape(named)
        if part.kind == "board":
            beside.append(f'<div class="obs-part obs-board">{label}{part.value}</div>')
        elif part.kind == "image":
            figure = f'<figure class="obs-image">{label}<img src="{html.escape(part.value)}" alt="{alt}"></figure>'
            if drawn and len(beside) == 1:
                beside.append(figure)
            else:
                chunks.append(figure)
        elif drawn and (part.kind == "text" or (part.kind == "markdown" and part.label == board_field)):
            chunks.append(
                f'<details class="obs-part obs-as-text"><summary>{html.escape(named)} as text</summary>'
                f'<pre class="obs-text">{html.escape(part.value)}</pre></details>'
            )
        elif part.kind == "text":
            chunks.append(f'<div class="obs-part">{label}<pre class="obs-text">{html.escape(part.value)}</pre></div>')
        elif part.kind == "markdown":
            shown = render_inline(part.value)
            chunks.append(f'<div class="obs-part">{label}<div class="obs-markdown">{shown}</div></div>')
        else:
            rows = "".join(
                f"<tr><th>{html.escape(readable(k))}</th><td>{_scalar(v)}</td></tr>" for k, v in part.value.items()
            )
            chunks.append(f'<table class="obs-fields">{rows}</table>')
    if beside:
        chunks.insert(0, f'<div class="obs-beside">{"".join(beside)}</div>')
    return '<div class="observation">' + "".join(chunks) + "</div>" if chunks else ""


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return html.escape(json.dumps(value))


def stats_html(reward: Any, done: bool, cumulative: float, steps: int) -> str:
    """The numbers a player watches: last reward, done, cumulative reward, step count."""
    cells = [
        ("reward", _number(reward)),
        ("done", "yes" if done else "no"),
        ("cumulative reward", _number(cumulative)),
        ("steps", str(steps)),
    ]
    body = "".join(
        f'<div class="stat" data-stat="{name.replace(" ", "-")}"><span>{name}</span><b>{value}</b></div>'
        for name, value in cells
    )
    return f'<div class="stats{" done" if done else ""}">{body}</div>'


def legal_html(actions: list[Any]) -> str:
    """Legal actions as buttons; a click sends its index (see play.LEGAL_CLICKS)."""
    if not actions:
        return ""
    buttons = "".join(
        f'<button class="legal" data-index="{i}">{html.escape(_label(a))}</button>' for i, a in enumerate(actions)
    )
    return f'<div class="legal-actions"><span>Legal actions:</span>{buttons}</div>'


def _label(action: Any) -> str:
    text = action if isinstance(action, str) else json.dumps(action, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"
