"""The playground: connect to a live environment (or launch one in a click), reset, act
through a form made from its action schema or its MCP tools, and read what comes back."""

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr
from sqlalchemy import Engine
from sqlmodel import Session

from app.ui import autoplay
from app.ui.action_form import FormState, field_control, index_hint, initial_form, tool_form, tool_help
from app.ui.direct import controls_html, direct_action
from app.ui.endpoints import launch_refusal
from app.ui.forms import (
    action_from_form,
    describe_errors,
    legal_action,
    visible,
)
from app.ui.live import Live, outbound_refusal
from app.ui.play_panel import Play, cleared, refusal, results, title_md
from app.ui.tasksets import choices, read_tasksets
from app.usecases.play import PlayError, PlaySession, PlaySessions
from app.usecases.reset_options import dataset_choice, reset_options
from app.usecases.your_endpoint import launch_or_reuse, running, until_running
from catalog.models import EnvironmentDetail
from catalog.store import cached_interface, find_environment, read_environment
from catalog.tasksets import Tasksets
from core.callers import ANONYMOUS
from core.errors import EnvhubError
from envclient.interface import Interface, read_interface
from hosting.models import EndpointStatus

# Wordle's way: the guess box empties once a guess is taken, and keeps a refused one to fix.
EMPTY_WHEN_TAKEN = "(text) => document.querySelector('#play-errors')?.innerText.trim() ? text : ''"


@dataclass(frozen=True)
class Wired:
    """The Play tab's events that others follow (connect, launch), and its connect and auto-connect."""

    events: list[Any]
    connect: Callable[[gr.Request, str, str | None], Awaitable[dict[Any, Any]]]
    reopen: Callable[[gr.Request, str], Awaitable[dict[Any, Any]]]


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
            launched, reused = await launch_or_reuse(endpoints, caller, environment)
        except EnvhubError as exc:
            refused = await asyncio.to_thread(launch_refusal, endpoints, caller, exc)
            yield {play.status: f"**Could not launch:** {refused}"}
            return
        endpoint = launched
        async for endpoint in until_running(endpoints, launched.id, launch_timeout_s + 30):
            if endpoint.status == EndpointStatus.STARTING:
                backend = endpoint.backend.value
                yield {play.status: f"Launching `{endpoint.id}` with the {backend} backend: {endpoint.message}…"}
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
        splits = [s.name for s in session.info.splits]

        def client() -> str:
            return visitors.client(request, visitors.caller(request))

        try:
            typed = (seed, split, index, more)
            options = await reset_options(engine, tasksets, session.environment, splits, typed, client)
        except EnvhubError as exc:
            return refusal(play, exc.message)
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
        endpoint = await running(endpoints, await asyncio.to_thread(visitors.caller, request), environment)
        if endpoint is None:
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
