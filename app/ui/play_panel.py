"""The Play tab's parts, and how they show an episode: the environment played, what came back, the history and
the download of the episode so far."""

import html
import json
from dataclasses import dataclass
from typing import Any

import gradio as gr

from app.ui import autoplay
from app.ui.action_form import FormState
from app.ui.direct import ARROW_PRESSES, CLICKS, board_hints
from app.ui.observation import legal_html, observation_view, render_view, stats_html
from app.ui.wording import plural
from app.usecases.play import PlayError, PlaySession
from app.usecases.play_episode import Outcome, episode_filename
from catalog.models import EnvironmentDetail

EPISODE_ROUTE = "/ui/episodes/{token}.jsonl"
HISTORY_ROWS = 25  # the newest on screen; the download holds them all


@dataclass(frozen=True)
class Play:
    title: gr.Markdown
    url: gr.Dropdown
    connect: gr.Button
    launch: gr.Button
    status: gr.Markdown
    seed: gr.Textbox
    split: gr.Dropdown
    task_index: gr.Textbox
    reset_options: gr.Code
    reset: gr.Button
    tool: gr.Dropdown
    tool_help: gr.Markdown
    controls: gr.HTML
    form: gr.State
    form_area: gr.Column
    step: gr.Button
    raw_action: gr.Code
    raw_step: gr.Button
    errors: gr.Markdown
    stats: gr.HTML
    observation: gr.HTML
    legal: gr.HTML
    tree: gr.JSON
    history: gr.HTML
    download: gr.HTML
    auto: autoplay.AutoPlay

    @property
    def results(self) -> list[Any]:
        return [self.stats, self.observation, self.legal, self.tree, self.history, self.download, self.errors]

    @property
    def setup(self) -> list[Any]:
        return [
            self.title, self.status, self.form, self.controls, self.tool, self.tool_help, self.split, self.task_index,
            *self.results,
        ]  # fmt: skip


def build() -> Play:
    title = gr.Markdown("Open an environment to play it, or type an OpenEnv server's URL.", elem_id="play-title")
    with gr.Row(equal_height=True):
        url = gr.Dropdown(
            [],
            label="Live URL",
            info="one of the environment's, or any OpenEnv server's: type it and press Connect",
            scale=4,
            elem_id="play-url",
            allow_custom_value=True,
        )
        connect = gr.Button("Connect", scale=1, elem_id="play-connect")
        launch = gr.Button("🚀 Launch locally", scale=1, variant="primary", elem_id="play-launch")
    status = gr.Markdown(elem_id="play-status")
    with gr.Row():
        with gr.Column(scale=2):
            with gr.Row(equal_height=True):
                seed = gr.Textbox(label="Seed", placeholder="random", elem_id="play-seed")
                split = gr.Dropdown([], label="Task split", visible=False, elem_id="play-split")
                task_index = gr.Textbox(label="Task index", placeholder="any", visible=False, elem_id="play-index")
            with gr.Accordion("More reset options (JSON)", open=False):
                reset_options = gr.Code(
                    "",
                    language="json",
                    lines=2,
                    label="Reset options (JSON)",
                    show_label=False,
                    elem_id="play-reset-options",
                )
            reset = gr.Button("↺ Reset", elem_id="play-reset")
            gr.Markdown("### Action")
            tool = gr.Dropdown([], label="MCP tool", visible=False, elem_id="play-tool")
            tool_help = gr.Markdown(elem_id="play-tool-help")
            controls = gr.HTML(elem_id="play-controls", js_on_load=ARROW_PRESSES)
            form = gr.State(FormState())
            form_area = gr.Column(elem_id="play-form")
            step = gr.Button("Step ▶", variant="primary", elem_id="play-step")
            errors = gr.Markdown(elem_id="play-errors", elem_classes=["play-errors"])
            with gr.Accordion("Raw action JSON", open=False):
                raw_action = gr.Code(
                    "{}", language="json", lines=3, label="Raw action (JSON)", show_label=False, elem_id="play-raw"
                )
                raw_step = gr.Button("Step with this JSON", size="sm", elem_id="play-raw-step")
            auto = autoplay.build()
        with gr.Column(scale=3):
            stats = gr.HTML(elem_id="play-stats")
            observation = gr.HTML(elem_id="play-observation", js_on_load=CLICKS)
            legal = gr.HTML(elem_id="play-legal", js_on_load=CLICKS)
            # Collapsed: drawing every node of a big observation's tree on each step cost more than the step.
            tree = gr.JSON(label="Observation (JSON)", open=False, elem_id="play-tree")
    gr.Markdown("### Episode history")
    history = gr.HTML(elem_id="play-history")  # a plain table: a data grid redrawn on every step was the slowest part
    download = gr.HTML(elem_id="play-download")
    return Play(
        title, url, connect, launch, status, seed, split, task_index, reset_options, reset, tool, tool_help, controls,
        form, form_area, step, raw_action, raw_step, errors, stats, observation, legal, tree, history, download, auto,
    )  # fmt: skip


def title_md(environment: EnvironmentDetail | None, url: str = "") -> str:
    """What the Play tab plays: the environment, or the server at a typed URL."""
    if environment is not None:
        return f"### Playing {environment.emoji or '🧩'} {environment.title} · `{environment.id}`"
    if url:
        return f"### Playing the server at `{url}` (not in the catalog)"
    return "Open an environment to play it, or type an OpenEnv server's URL."


HISTORY_HEADERS = ("step", "sent", "reward", "done", "cumulative")


def history_html(rows: list[list[Any]]) -> str:
    """The newest steps first, as a table a screen reader reads as a grid."""
    if not rows:
        return ""
    head = "".join(f'<th role="columnheader">{name}</th>' for name in HISTORY_HEADERS)
    body = "".join(
        '<tr role="row">'
        + "".join(f'<td role="gridcell">{html.escape(c if isinstance(c, str) else json.dumps(c))}</td>' for c in row)
        + "</tr>"
        for row in rows
    )
    return (
        f'<div class="history-wrap"><table class="history" role="grid"><thead><tr role="row">{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def download_html(session: PlaySession) -> str:
    count = len(session.episode.records)
    if not count:
        return ""
    href = EPISODE_ROUTE.format(token=session.token)
    return (
        f'<a class="download" id="episode-download" href="{html.escape(href)}" '
        f'download="{html.escape(episode_filename(session.environment))}">'
        f"⬇ Download the episode (JSONL, {plural(count, 'record')})</a>"
    )


def cleared(play: Play) -> dict[Any, Any]:
    return {
        play.stats: "",
        play.observation: "",
        play.legal: "",
        play.tree: None,
        play.history: "",
        play.download: "",
        play.errors: "",
    }


def results(play: Play, session: PlaySession, outcome: Outcome) -> dict[Any, Any]:
    records = session.episode.records
    hints = board_hints(session.form, session.info)
    view = observation_view(outcome.observation, records[0]["observation"] if records else None, hints)
    session.legal_actions = view.legal_actions
    episode = session.episode
    return {
        play.stats: stats_html(outcome.reward, outcome.done, episode.cumulative_reward, episode.steps),
        play.observation: render_view(view) or '<p class="muted">The observation is empty.</p>',
        play.legal: legal_html(view.legal_actions),
        play.tree: view.tree,
        play.history: history_html(episode.history_rows()[:HISTORY_ROWS]),
        play.download: download_html(session),
        play.errors: f"**The environment says:** {view.error}" if view.error else "",
    }


def refusal(play: Play, error: PlayError | str) -> dict[Any, Any]:
    message = error.message if isinstance(error, PlayError) else error
    return {play.errors: f"**Not sent:** {message}" if isinstance(error, str) else f"**Refused:** {message}"}
