"""The page's Board tab: each submitted Space's newest finished revision, ranked by verdict, then training signal,
with headroom and gameability beside them; and how to submit one."""

import asyncio
import html
from dataclasses import dataclass

import gradio as gr
from sqlalchemy import Engine
from sqlmodel import Session

from app.ui.cards import Badge, badges_html
from catalog.submissions import BoardRow, board

_KINDS = {"pass": "ok", "warn": "busy", "fail": "bad"}
HOW = (
    'Submit a Space at a commit with `POST /api/submissions {"space": "owner/name", "revision": "<sha>"}`; '
    "it is downloaded, launched and checked, and its newest finished revision shows here."
)


@dataclass(frozen=True)
class BoardTab:
    table: gr.HTML
    refresh: gr.Button


def build() -> BoardTab:
    gr.Markdown(HOW, elem_id="board-how")
    refresh = gr.Button("Refresh", size="sm", elem_id="board-refresh")
    return BoardTab(gr.HTML(elem_id="board-table"), refresh)


def _figure(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _row(row: BoardRow) -> str:
    verdict = row.verdict.value if row.verdict is not None else "failed"
    badge = badges_html([Badge(verdict, _KINDS.get(verdict, "bad"))])
    space = html.escape(row.space)
    return (
        f'<tr><td>{row.rank}</td><td><a href="?env={html.escape(row.space, quote=True)}">{space}</a> '
        f"<code>{html.escape(row.revision[:7])}</code></td><td>{badge}</td><td>{_figure(row.training_signal)}</td>"
        f"<td>{_figure(row.headroom)}</td><td>{_figure(row.gameability_gap)}</td>"
        f"<td>{row.finished_at:%Y-%m-%d %H:%M}</td></tr>"
    )


def board_html(rows: list[BoardRow]) -> str:
    if not rows:
        return '<p class="empty-state">No submission has finished yet.</p>'
    head = "".join(
        f"<th>{h}</th>"
        for h in ("#", "Space", "Verdict", "Training signal", "Headroom", "Gameability gap", "Finished (UTC)")
    )
    return f'<table class="board"><thead><tr>{head}</tr></thead><tbody>{"".join(map(_row, rows))}</tbody></table>'


def wire(engine: Engine, tab: BoardTab, shown: gr.Tab) -> None:
    async def show() -> str:
        def read() -> list[BoardRow]:
            with Session(engine) as session:
                return board(session)

        return board_html(await asyncio.to_thread(read))

    shown.select(show, None, tab.table)
    tab.refresh.click(show, None, tab.table)
