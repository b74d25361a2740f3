"""The playground: connect to a live environment (or launch one in a click), reset, act
through a form made from its action schema or its MCP tools, and read what comes back."""

import asyncio
import html
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr
from sqlalchemy import Engine
from sqlmodel import Session

from app.ui import autoplay
from app.ui.action_form import FormState, field_control, index_hint, initial_form, tool_form, tool_help
from app.ui.direct import ARROW_PRESSES, CLICKS, board_hints, controls_html, direct_action
from app.ui.endpoints import launch_refusal, reusable
from app.ui.episode import Outcome, episode_filename
from app.ui.forms import (
    action_from_form,
    describe_errors,
    legal_action,
    visible,
)
from app.ui.live import Live, outbound_refusal
from app.ui.observation import legal_html, observation_view, render_view, stats_html
from app.ui.tasksets import choices, dataset_choice, dataset_reset, read_tasksets
from app.ui.wording import plural
from app.usecases.play import PlayError, PlaySession, PlaySessions
from catalog.models import EnvironmentDetail
from catalog.store import cached_interface, find_environment, read_environment
from catalog.tasksets import Tasksets
from core.callers import ANONYMOUS
from core.errors import EnvhubError
from envclient.interface import Interface, read_interface
from hosting.models import Backend, EndpointStatus
from hosting.options import LaunchRequest

EPISODE_ROUTE = "/ui/episodes/{token}.jsonl"
HISTORY_ROWS = 25  # the newest on screen; the download holds them all
# Wordle's way: the guess box empties once a guess is taken, and keeps a refused one to fix.
EMPTY_WHEN_TAKEN = "(text) => document.querySelector('#play-errors')?.innerText.trim() ? text : ''"


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


@dataclass(frozen=True)
class Wired:
    """The Play tab's events that others follow (connect, launch), and its connect and auto-connect."""

    events: list[Any]
    connect: Callable[[gr.Request, str, str | None], Awaitable[dict[Any, Any]]]
    reopen: Callable[[gr.Request, str], Awaitable[dict[Any, Any]]]


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


def wire(
    engine: Engine,
    live: Live,
    sessions: PlaySessions,
    tasksets: Tasksets,
    launch_timeout_s: float,
    play: Play,
    selected: gr.Textbox,
) -> Wired:
    """Wire the panel's events; returns what others follow and call. A launch from here may take `launch_timeout_s`
    (and a little more) to run."""
    endpoints, visitors = live.endpoints, live.visitors

    def session_of(request: gr.Request) -> PlaySession | None:
        return sessions.find(request.session_hash)

    async def send(request: gr.Request, action: dict[str, Any]) -> dict[Any, Any]:
        session = session_of(request)
        if session is None:
            return refusal(play, "connect to the environment first")
        if session.episode.done:  # what the server says then is for code ("call reset()"), not for this page
            return refusal(play, "the episode is over: press **Reset** to start a new one")
        try:
            outcome = await session.step(action)
        except PlayError as exc:
            return refusal(play, exc)
        return results(play, session, outcome)

    async def connect(request: gr.Request, environment_id: str, url: str | None) -> dict[Any, Any]:
        """Connect this tab to a URL: one of the open environment's, or any OpenEnv server's typed in."""
        async with sessions.connecting(request.session_hash):
            return await connect_now(request, environment_id, url)

    async def connect_now(request: gr.Request, environment_id: str, url: str | None) -> dict[Any, Any]:
        """`connect`, for a caller that holds the tab's connecting lock."""
        url = (url or "").strip().rstrip("/")
        environment = await read_environment(engine, environment_id) if environment_id else None
        if not url:
            return {play.status: "Type an OpenEnv server's URL above, pick one of this environment's, or launch it."}
        listed = environment if environment and url in await live.read_urls(environment, request) else None
        # One outbound session for the probe and the play socket: both reach the address checked here.
        outbound = await live.outbound_for(listed, request)
        address = live.connection_url(url, request)
        refused = await outbound_refusal(outbound, address)
        if refused is not None:
            await outbound.aclose()
            return {play.status: f"**Not connecting:** {refused}"}
        try:
            info = await read_interface(address, outbound)
        except BaseException:
            await outbound.aclose()
            raise
        if info.metadata is None and info.schema is None and info.tools is None:
            await outbound.aclose()
            why = "; ".join(info.problems) or "it did not answer"
            return {
                play.status: f"**Could not connect to** `{url}`: {why}. An OpenEnv server answers GET /schema "
                "and /metadata at the URL it is reached at: check the address and that the server runs."
            }
        if listed is not None:
            info = info.or_else(cached_interface(listed))
        name = listed.id if listed is not None else url
        session = await sessions.open(request.session_hash or "", name, url, info, outbound, address)
        form = session.form = initial_form(info)
        note = f"Connected to `{url}`. Press **Reset** to start an episode."
        if info.problems:
            note += "\n\n" + "\n".join(f"- {p}" for p in info.problems)
        if form.mode == "none":
            note += "\n\nNo action schema was found: send actions as raw JSON below."
        tasks = [(s.name, s.name) for s in info.splits]
        if listed is not None:
            try:
                linked = read_tasksets(engine, tasksets, listed, info, visitors, request)
                tasks = choices(await asyncio.wait_for(linked, 15), seeds=False)
            except TimeoutError:
                note += "\n\nThe linked datasets took too long to read; their splits are not listed."
        return {
            play.title: title_md(listed, url),
            play.status: note,
            play.form: form,
            play.controls: controls_html(form),
            play.tool: gr.Dropdown(
                choices=[t.name for t in info.tools or ()], value=form.tool, visible=form.mode == "tool"
            ),
            play.tool_help: tool_help(info, form.tool),
            play.split: gr.Dropdown(choices=tasks, value=None, visible=bool(tasks)),
            play.task_index: gr.Textbox(value="", visible=bool(tasks), info=index_hint(info, None)),
        } | cleared(play)  # fmt: skip

    async def launch(request: gr.Request, environment_id: str) -> AsyncIterator[dict[Any, Any]]:
        """Connect to the caller's endpoint of this environment and revision, launching one only when there is none; a
        tab that plays that endpoint already goes on with its episode."""
        environment = await read_environment(engine, environment_id) if environment_id else None
        if environment is None:
            yield {play.status: "Open an environment first."}
            return
        caller = ANONYMOUS
        try:
            caller = await asyncio.to_thread(visitors.acting_caller, request)
            endpoint = await asyncio.to_thread(reusable, endpoints, caller, environment)
            reused = endpoint is not None
            if endpoint is None:
                body = LaunchRequest(environment=environment_id, backend=Backend.PROCESS)
                endpoint = await asyncio.to_thread(endpoints.launch, body, caller, for_play=True)
        except EnvhubError as exc:
            yield {play.status: f"**Could not launch:** {launch_refusal(endpoints, caller, exc)}"}
            return
        deadline = asyncio.get_running_loop().time() + launch_timeout_s + 30
        while endpoint.status == EndpointStatus.STARTING and asyncio.get_running_loop().time() < deadline:
            backend = endpoint.backend.value
            yield {play.status: f"Launching `{endpoint.id}` with the {backend} backend: {endpoint.message}…"}
            await asyncio.sleep(0.3)
            endpoint = await asyncio.to_thread(endpoints.store.get, endpoint.id)
        if endpoint.status != EndpointStatus.RUNNING:
            yield {play.status: f"**Launch failed** ({endpoint.status.value}): {endpoint.message}"}
            return
        url = visitors.endpoint_url(request, endpoint.id)
        async with sessions.connecting(request.session_hash):  # after the tab's auto-connect, if one is under way
            session = session_of(request)
            playing = session is not None and session.url == url
            connected = {} if playing else await connect_now(request, environment_id, url)
        if playing:
            connected[play.status] = (
                f"This tab plays your endpoint `{endpoint.id}`, which was running already: `{url}`. The episode goes "
                "on; press **Reset** for a new one. (To run another, launch it from the Launch tab.)"
            )
        elif reused and play.form in connected:
            connected[play.status] = (
                f"Connected to your endpoint `{endpoint.id}`, which was running already: `{url}`. Press **Reset** to "
                "start an episode. (To run another, launch it from the Launch tab.)"
            )
        yield {play.url: await url_menu(live, environment, request, url)} | connected

    async def reset(request: gr.Request, seed: str, split: str | None, index: str, more: str) -> dict[Any, Any]:
        session = session_of(request)
        if session is None:
            return refusal(play, "connect to the environment first")
        options: dict[str, Any] = {}
        if more and more.strip():
            try:
                options = json.loads(more)
            except json.JSONDecodeError as exc:
                return refusal(play, f"the reset options are not valid JSON ({exc.msg})")
            if not isinstance(options, dict):
                return refusal(play, "the reset options must be a JSON object")
        if seed and seed.strip():
            if not seed.strip().isdigit():
                return refusal(play, "the seed must be a whole number, 0 or more (or empty for a random one)")
            options["seed"] = int(seed)
        if index and index.strip() and not index.strip().isdigit():
            return refusal(play, "the task index must be a whole number, 0 or more")
        if dataset_choice(split) is not None:
            environment = await read_environment(engine, session.environment)
            if environment is None:
                return refusal(play, f"{session.environment} is no longer in the catalog")
            row = int(index) if index and index.strip() else None
            try:
                client = visitors.client(request, await asyncio.to_thread(visitors.caller, request))
                drawn = options.get("seed")
                options |= await dataset_reset(engine, tasksets, environment, str(split), row, drawn, client)
            except EnvhubError as exc:
                return refusal(play, exc.message)
        elif index and index.strip() and session.info.splits:
            # The Task API lists tasks; environments take the one to play as reset options.
            options["split"] = split or session.info.splits[0].name
            options["index"] = int(index)
        elif split and session.info.splits:
            options["split"] = split
        try:
            outcome = await session.reset(options)
        except PlayError as exc:
            return refusal(play, exc)
        return results(play, session, outcome)

    async def step_raw(request: gr.Request, text: str) -> dict[Any, Any]:
        try:
            action = json.loads(text or "{}")
        except json.JSONDecodeError as exc:
            return refusal(play, f"the action is not valid JSON ({exc.msg})")
        if not isinstance(action, dict):
            return refusal(play, "the action must be a JSON object")
        return await send(request, action)

    async def step_legal(request: gr.Request, form: FormState, event: gr.EventData) -> dict[Any, Any]:
        session = session_of(request)
        index = getattr(event, "index", None)
        if session is None or not isinstance(index, int) or not 0 <= index < len(session.legal_actions):
            return refusal(play, "that action is no longer listed")
        action = legal_action(form.fields, session.legal_actions[index])
        if action is None:
            return refusal(play, "the legal actions do not map onto one action field; use the form")
        return await send(request, action)

    async def step_direct(request: gr.Request, form: FormState, event: gr.EventData) -> dict[Any, Any]:
        """A direct control's click: a choice's button, or a cell or column of the board."""
        action = direct_action(form, getattr(event, "action", None))
        if action is None:
            return refusal(play, "that control does not fit the action form; use the form")
        return await send(request, action)

    def pick_tool(request: gr.Request, name: str | None) -> dict[Any, Any]:
        session = session_of(request)
        info = session.info if session else Interface()
        form = tool_form(info, name)
        if session is not None:
            session.form = form
        return {play.form: form, play.controls: controls_html(form), play.tool_help: tool_help(info, name)}

    def pick_split(request: gr.Request, split: str | None) -> Any:
        session = session_of(request)
        if dataset_choice(split) is not None:
            return gr.Textbox(info="a row of the dataset's split; empty for a row drawn from the seed")
        return gr.Textbox(info=index_hint(session.info, split) if session else None)

    # Steps and resets skip Gradio's queue: one POST each instead of a join and an event stream,
    # which halves a step's round trip; a tab's session serialises them itself. No progress shown: a
    # tracker on each of the seven outputs, redrawn every tenth of a second, cost more than most steps take.
    common: dict[str, Any] = {"show_progress": "hidden", "queue": False}
    connected = play.connect.click(connect, [selected, play.url], play.setup, show_progress="minimal")
    launched = play.launch.click(launch, [selected], [play.url, *play.setup], show_progress="minimal")
    play.reset.click(reset, [play.seed, play.split, play.task_index, play.reset_options], play.results, **common)
    play.raw_step.click(step_raw, [play.raw_action], play.results, **common)
    play.legal.click(step_legal, [play.form], play.results, **common)
    play.controls.click(step_direct, [play.form], play.results, **common)
    play.observation.click(step_direct, [play.form], play.results, **common)
    play.tool.input(pick_tool, [play.tool], [play.form, play.controls, play.tool_help], show_progress="hidden")
    play.split.input(pick_split, [play.split], [play.task_index], **common)

    with play.form_area:  # the form is drawn here, again each time the form state changes

        @gr.render(inputs=[play.form], triggers=[play.form.change])  # type: ignore[untyped-decorator]
        def render_form(form: FormState) -> None:
            draw_form(form)

    def draw_form(form: FormState) -> None:
        shown = visible(form.fields)
        if form.mode == "none":
            return
        if not shown:
            gr.Markdown("This action takes no arguments.", elem_classes=["muted"])
        controls = [field_control(f, form.tool or "action") for f in shown]

        async def step(request: gr.Request, *values: Any) -> dict[Any, Any]:
            arguments, errors = action_from_form(form.fields, values)
            if errors:
                return {play.errors: "**Fix the form first:**\n" + describe_errors(errors)}
            return await send(request, form.action(arguments))

        play.step.click(step, controls, play.results, **common)
        for control in controls:
            if isinstance(control, gr.Textbox):
                submitted = control.submit(step, controls, play.results, **common)
                submitted.then(None, [control], [control], js=EMPTY_WHEN_TAKEN, **common)

    async def reopen(request: gr.Request, environment_id: str) -> dict[Any, Any]:
        """Play opened on an environment this tab does not play yet: connect to the caller's running endpoint of it,
        if there is one (a Space's host is left alone: a request would wake it)."""
        async with sessions.connecting(request.session_hash):
            return await reopen_now(request, environment_id)

    async def reopen_now(request: gr.Request, environment_id: str) -> dict[Any, Any]:
        session = session_of(request)
        environment = await read_environment(engine, environment_id) if environment_id else None
        unchanged = {play.title: gr.skip()}
        if environment is None or (session is not None and session.environment == environment.id):
            return unchanged
        caller = await asyncio.to_thread(visitors.caller, request)
        endpoint = await asyncio.to_thread(reusable, endpoints, caller, environment)
        if endpoint is None or endpoint.status != EndpointStatus.RUNNING:
            return unchanged
        url = visitors.endpoint_url(request, endpoint.id)
        connected = await connect_now(request, environment_id, url)
        return {play.url: await url_menu(live, environment, request, url)} | connected

    autoplay.wire(
        engine,
        live.guard,
        play.auto,
        session_of,
        lambda session, outcome: results(play, session, outcome),
        play.results,
    )
    return Wired([connected, launched], connect, reopen)


async def url_menu(live: Live, environment: EnvironmentDetail | None, request: gr.Request, url: str) -> gr.Dropdown:
    """The Live URL menu: the environment's live URLs, `url` chosen."""
    return gr.Dropdown(choices=await live.read_urls(environment, request) if environment else [], value=url)


def prepare(
    engine: Engine, live: Live, sessions: PlaySessions, play: Play, environment_id: str, request: gr.Request
) -> dict[Any, Any]:
    """Offer the environment's live URLs; keep this tab's session if it plays the same environment."""
    with Session(engine) as db:
        environment = find_environment(db, environment_id) if environment_id else None
    urls = live.urls(environment, request) if environment else []
    session = sessions.find(request.session_hash)
    if session is not None and environment is not None and session.environment == environment.id:
        return {play.url: gr.Dropdown(choices=urls or [session.url], value=session.url)}
    note = (
        "Press **Connect** to play it at the URL above."
        if urls
        else "It is not running anywhere yet: press **Launch locally** to start it on this server."
    )
    return {
        play.title: title_md(environment),
        play.url: gr.Dropdown(choices=urls, value=urls[0] if urls else None),
        play.status: note,
        play.form: FormState(),
        play.controls: "",
        play.tool: gr.Dropdown(visible=False),
        play.tool_help: "",
        play.split: gr.Dropdown(visible=False),
        play.task_index: gr.Textbox(visible=False),
    } | cleared(play)
