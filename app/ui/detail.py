"""The environment page: header, README, schemas and tools, its quality report, status, and the Connect panel."""

import asyncio
import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gradio as gr
from sqlalchemy import Engine
from sqlmodel import Session

from app.ui import connect, publish, statistics
from app.ui.describe import api_html, header_html, readme_base, status_html
from app.ui.evaluate_panel import RUN_CLICKS
from app.ui.introspect import can_introspect, template_interface
from app.ui.live import Live, outbound_refusal
from app.ui.quality import latest_report, quality_html
from app.ui.readme import render_markdown
from app.ui.tasksets import SEEDS, choices, read_tasksets, tasksets_html
from app.ui.validation import validation_html
from catalog.models import EnvironmentDetail
from catalog.space_health import SpaceHealth, is_waking
from catalog.store import cached_interface, find_environment, read_environment
from catalog.tasksets import Tasksets
from core.errors import EnvhubError
from envclient.health import HealthStatus
from envclient.interface import Interface, read_interface


@dataclass(frozen=True)
class Detail:
    header: gr.HTML
    readme: gr.HTML
    api: gr.HTML
    tasks: gr.HTML
    quality: gr.HTML
    run_quality: gr.Button
    statistical: statistics.StatisticsPanel
    status: gr.HTML
    board: gr.HTML
    play: gr.Button
    evaluate: gr.Button
    launch: gr.Button
    wake: gr.Button
    connect: connect.Connect
    publish: publish.Publish
    validation: gr.HTML

    @property
    def outputs(self) -> list[Any]:
        return [self.header, self.readme, self.quality, self.validation, self.wake, *self.actions, *self.live_outputs]

    @property
    def actions(self) -> list[gr.Button]:
        """What is done with the open environment: shown only while one is open."""
        return [self.play, self.evaluate, self.launch, self.run_quality]

    @property
    def live_outputs(self) -> list[Any]:
        """What refresh() fills in from the live environment."""
        return [self.api, self.tasks, self.status, *self.connect.outputs]


def asleep(environment: EnvironmentDetail) -> bool:
    """The Hub or the health monitor says the Space sleeps, and no wake is under way: a request would wake it."""
    if is_waking(environment.health):
        return False
    sleeping = environment.health is not None and environment.health.status == HealthStatus.SLEEPING
    return sleeping or environment.runtime_stage in ("SLEEPING", "PAUSED")


def readable(environment: EnvironmentDetail, url: str | None) -> bool:
    """refresh() reads its schemas: from its live URL (a sleeping Space's is not woken), or from its source."""
    return (url is not None and not asleep(environment)) or can_introspect(environment)


def build() -> Detail:
    header = gr.HTML('<p class="muted">No environment is open: choose one in Browse.</p>', elem_id="env-header")
    with gr.Row():
        with gr.Column(scale=3), gr.Tabs():
            with gr.Tab("README"):
                readme = gr.HTML(elem_id="readme", elem_classes=["readme"])
            with gr.Tab("API", elem_id="api-tab"):
                api = gr.HTML(elem_id="env-api")
            with gr.Tab("Tasks", elem_id="tasks-tab"):
                tasks = gr.HTML(elem_id="env-tasks")
            with gr.Tab("Quality", elem_id="quality-tab"):
                run_quality = gr.Button("▶ Run a quality report", size="sm", visible=False, elem_id="quality-run")
                quality = gr.HTML(elem_id="env-quality")
                validation = gr.HTML(elem_id="env-validation")
                statistical = statistics.build()
            with gr.Tab("Connect", elem_id="connect-tab"):
                panel = connect.build()
            with gr.Tab("Leaderboard", elem_id="leaderboard-tab"):
                board = gr.HTML(elem_id="env-leaderboard", js_on_load=RUN_CLICKS)
        with gr.Column(scale=1, min_width=220):
            play = gr.Button("▶ Play", variant="primary", visible=False, elem_id="open-play")
            evaluate = gr.Button("📊 Evaluate", visible=False, elem_id="open-evaluate")
            launch = gr.Button("🚀 Launch", visible=False, elem_id="open-launch")
            wake = gr.Button("☀ Wake the Space", elem_id="env-wake", visible=False)
            status = gr.HTML(elem_id="env-status")
            deploy = publish.build()
    return Detail(
        header,
        readme,
        api,
        tasks,
        quality,
        run_quality,
        statistical,
        status,
        board,
        play,
        evaluate,
        launch,
        wake,
        panel,
        deploy,
        validation,
    )


def show(
    engine: Engine, live: Live, hf_endpoint: str, detail: Detail, environment_id: str, request: gr.Request | None
) -> dict[Any, Any]:
    """Everything the catalog knows, at once; the live part follows in refresh()."""
    with Session(engine) as session:
        environment = find_environment(session, environment_id) if environment_id else None
        report = latest_report(session, environment.id) if environment is not None else None
        validated = validation_html(session, environment) if environment is not None else ""
    if environment is None:
        missing = f"No environment <code>{html.escape(environment_id)}</code> in the catalog."
        return not_found(live, detail, missing, request)
    urls = live.urls(environment, request)
    url = urls[0] if urls else None
    info = cached_interface(environment)
    active = [e for e in live.endpoints.list(active_only=True) if e.environment == environment.id]  # newest first
    launched = active[0].status.value if active else None
    serving = {e.id: e.revision for e in active if e.revision}
    base = readme_base(hf_endpoint, environment)
    return (
        {
            detail.header: header_html(environment, hf_endpoint, launched, serving),
            detail.readme: render_markdown(environment.readme or environment.description or "", base_url=base),
            detail.api: api_html(info, reading=info.schema is None and readable(environment, url)),
            detail.tasks: '<p class="muted">Reading its tasks and datasets…</p>',
            detail.quality: quality_html(environment, report),
            detail.validation: validated,
            detail.status: status_html(environment, url, serving_runtime(live, environment.id)),
            detail.wake: gr.Button(visible=asleep(environment)),
        }
        | dict.fromkeys(detail.actions, gr.Button(visible=True))
        | connect_updates(live, detail, url, environment, info, request)
    )


def not_found(live: Live, detail: Detail, message: str, request: gr.Request | None) -> dict[Any, Any]:
    """The Environment tab when a link names what the catalog does not hold: `message` (HTML) says what."""
    return (
        {
            detail.header: f'<div class="env-header"><h1>Not found</h1><p>{message}</p></div>',
            detail.readme: "",
            detail.api: "",
            detail.tasks: "",
            detail.quality: "",
            detail.validation: "",
            detail.status: "",
            detail.wake: gr.Button(visible=False),
        }
        | dict.fromkeys(detail.actions, gr.Button(visible=False))
        | connect.updates(detail.connect, None, "", Interface(), base=live.visitors.base(request))
    )


def connect_updates(
    live: Live,
    detail: Detail,
    url: str | None,
    environment: EnvironmentDetail,
    info: Interface,
    request: gr.Request | None,
) -> dict[Any, Any]:
    pool, private = live.running_pool(environment.id)
    base = live.visitors.base(request)
    return connect.updates(detail.connect, url, environment.title, info, pool, base=base, private=private)


async def wake(
    engine: Engine, live: Live, spaces: SpaceHealth, detail: Detail, environment_id: str, request: gr.Request | None
) -> dict[Any, Any]:
    """Send a sleeping Space the request that wakes it; the health monitor follows it from there."""
    try:
        await spaces.wake(environment_id)
    except EnvhubError as exc:
        return {detail.status: f'<p class="problem">Could not wake it: {html.escape(exc.message)}</p>'}
    status = await current_status(engine, live, environment_id, request)
    return {detail.status: status, detail.wake: gr.Button(visible=False)}


async def current_status(engine: Engine, live: Live, environment_id: str, request: gr.Request | None) -> str:
    """The status as the catalog has it now: a page's slow refresh must not show what a wake made while it ran
    as it was before."""
    environment = await read_environment(engine, environment_id)
    if environment is None:
        return ""
    urls = await live.read_urls(environment, request)
    serving = await asyncio.to_thread(serving_runtime, live, environment_id)
    return status_html(environment, urls[0] if urls else None, serving)


def serving_runtime(live: Live, environment_id: str) -> str | None:
    """What the environment's newest running endpoint runs on, for the side panel's Runtime."""
    endpoint = live.endpoints.running_endpoint(environment_id)
    return f"{endpoint.backend.value} endpoint {endpoint.id}" if endpoint is not None else None


async def refresh(
    engine: Engine,
    live: Live,
    tasksets: Tasksets,
    hf_endpoint: str,
    detail: Detail,
    environment_id: str,
    request: gr.Request | None,
    menus: Sequence[gr.Dropdown] = (),
) -> dict[Any, Any]:
    """Read schemas, tools and tasks from the live URL when the catalog has not cached them; `menus` are given
    what it can be played on (seeds first)."""
    environment = await read_environment(engine, environment_id) if environment_id else None
    if environment is None:
        return {output: gr.skip() for output in [*detail.live_outputs, *menus]}
    urls = await live.read_urls(environment, request)
    url = urls[0] if urls else None
    info = cached_interface(environment)
    missing = info.schema is None or (not info.tools and not info.splits)
    # Opening a page must not wake a sleeping Space, nor reach an address the guard refuses.
    if url and missing and not asleep(environment):
        outbound = await live.outbound_for(environment, request)
        try:
            address = live.connection_url(url, request)
            if await outbound_refusal(outbound, address) is None:
                info = info.or_else(await read_interface(address, outbound))
        finally:
            await outbound.aclose()
    elif info.schema is None and can_introspect(environment):  # envhub has the source: no launch needed
        info = info.or_else(await template_interface(engine, environment))
    try:
        linked = await read_tasksets(engine, tasksets, environment, info, live.visitors, request)
        tasks = tasksets_html(linked, hf_endpoint)
        listed = choices(linked, seeds=True)
    except EnvhubError as exc:
        tasks = f'<p class="problem">Could not read its tasks: {html.escape(exc.message)}</p>'
        listed = [SEEDS]
    return (
        {menu: gr.Dropdown(choices=listed, value="") for menu in menus}
        | {
            detail.api: api_html(info),
            detail.tasks: tasks,
            detail.status: await current_status(engine, live, environment_id, request),
        }
        | await asyncio.to_thread(connect_updates, live, detail, url, environment, info, request)
    )
