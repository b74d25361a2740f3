"""What an environment can be evaluated on, in the UI: the detail page's Tasks tab, and the task choices of
the Play and Evaluate tabs (seeds, a Task API split, or a linked dataset's split).

A choice is a string: "" for seeds, a Task API split's name, or `dataset:<id>:<split>`.
"""

import asyncio
import html
import json

import gradio as gr
from sqlalchemy import Engine
from sqlmodel import Session

from app.ui.requests import Visitors
from app.usecases.reset_options import DATASET
from catalog.models import EnvironmentDetail
from catalog.tasksets import (
    DatasetTaskset,
    EnvironmentTasksets,
    Tasksets,
    environment_tasksets,
)
from envclient.interface import Interface

__all__ = ["SEEDS", "choices", "read_tasksets", "tasksets_html"]

SEEDS = ("seeds 0, 1, 2, …", "")


def _e(value: object) -> str:
    return html.escape(str(value))


def choices(tasksets: EnvironmentTasksets, *, seeds: bool) -> list[tuple[str, str]]:
    """(label, value) pairs for a dropdown: seeds first when offered, then every split that can reset it."""
    listed = [SEEDS] if seeds else []
    for split in tasksets.task_api:
        counted = "" if split.count is None else f" ({split.count:,} tasks)"
        listed.append((f"Task API · {split.name}{counted}", split.name))
    for dataset in tasksets.datasets:
        if dataset.resets_by is None:
            continue
        for part in dataset.splits:
            counted = "" if part.rows is None else f" ({part.rows:,} rows)"
            listed.append((f"{dataset.dataset} · {part.name}{counted}", f"{DATASET}{dataset.dataset}:{part.name}"))
    return listed


async def read_tasksets(
    engine: Engine,
    tasksets: Tasksets,
    environment: EnvironmentDetail,
    info: Interface,
    visitors: Visitors,
    request: gr.Request | None,
) -> EnvironmentTasksets:
    """The environment's tasksets, their downloads counted against the visitor who asked."""

    def read() -> EnvironmentTasksets:
        client = visitors.client(request, visitors.caller(request))
        with Session(engine) as session:
            return environment_tasksets(session, tasksets, environment, info, client)

    return await asyncio.to_thread(read)


def _preview(rows: tuple[dict[str, object], ...]) -> str:
    if not rows:
        return ""
    columns = list(dict.fromkeys(c for row in rows for c in row))
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{_e(v if isinstance(v := row.get(c, ''), str) else json.dumps(v))}</td>" for c in columns)
        + "</tr>"
        for row in rows
    )
    return f'<table class="schema preview"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _dataset_html(dataset: DatasetTaskset, hf_endpoint: str) -> str:
    url = f"{hf_endpoint.rstrip('/')}/datasets/{dataset.dataset}"
    revision = f" at <code>{_e(dataset.revision[:12])}</code>" if dataset.revision else ""
    parts = [f'<h4>Dataset <a href="{_e(url)}" target="_blank" rel="noopener noreferrer">{_e(dataset.dataset)} ↗</a>'
             f"{revision}</h4>"]  # fmt: skip
    if dataset.resets_by:
        parts.append(f"<p>Resets with {_e(dataset.resets_by)}.</p>")
    if dataset.problem:
        parts.append(f'<p class="problem">{_e(dataset.problem)}</p>')
    for split in dataset.splits:
        counted = "rows not counted (files too large to read here)" if split.rows is None else f"{split.rows:,} rows"
        parts.append(f"<h5><code>{_e(split.name)}</code>: {counted}</h5>{_preview(split.preview)}")
    return '<div class="taskset">' + "".join(parts) + "</div>"


def tasksets_html(tasksets: EnvironmentTasksets, hf_endpoint: str) -> str:
    """The Tasks tab: Task API splits with their first tasks, then each linked dataset."""
    parts = ["<h3>What it can be evaluated on</h3>"]
    if tasksets.note:
        parts.append(f"<p class=muted>{_e(tasksets.note)}</p>")
    if tasksets.task_api:
        rows = "".join(
            f"<tr><td><code>{_e(s.name)}</code></td><td>{'' if s.count is None else f'{s.count:,}'}</td>"
            f"<td>{'<br>'.join(_e(json.dumps(t)[:200]) for t in s.first)}</td></tr>"
            for s in tasksets.task_api
        )
        parts.append(
            "<h4>Task API splits</h4>"
            '<table class="schema"><thead><tr><th>split</th><th>tasks</th><th>first tasks</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>"
        )
    parts += [_dataset_html(d, hf_endpoint) for d in tasksets.datasets]
    parts.append(
        "<p class=muted>Choose a split in the Play tab to play its tasks, or in the Evaluate tab to run a "
        "policy over them.</p>"
    )
    return '<div class="tasksets">' + "".join(parts) + "</div>"
