"""The whole UI: one Gradio Blocks page with Browse, Environment, Play, Evaluate and Launch tabs,
deep links (/?env=owner/name, /?q=wordle, /?episode=ID, /?agent_run=ID), and its mount at / on the FastAPI app."""

import asyncio
import html
import importlib.resources
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import gradio as gr
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse, Response

from app.services import Services
from app.ui import (
    agent_run,
    browse,
    detail,
    evaluate,
    evaluate_panel,
    launch,
    play,
    play_panel,
    publish,
    quality,
    statistics,
    status,
    submissions,
)
from app.ui import endpoints as my_endpoints
from app.ui.assets import FRONTEND_BUILD, FrontendAssets
from app.ui.live import Live
from app.ui.play_panel import EPISODE_ROUTE
from app.ui.requests import Visitors
from app.ui.runs import Runs
from app.ui.style import CSS, THEME
from app.usecases.play_episode import episode_filename
from catalog.store import read_environment
from core.errors import EnvhubError
from evals.agent_runs import door_side
from hosting.models import Endpoint

HEADER = (
    '<div class="envhub-header"><h1>🌍 envhub</h1>'
    "<p>Find, play and launch OpenEnv environments. "
    '<a href="/docs" target="_blank">API</a></p></div>'
)
SHOW_URL = """(id) => {
  const u = new URL(location);
  u.searchParams.delete('q');
  id ? u.searchParams.set('env', id) : u.searchParams.delete('env');
  history.replaceState(null, '', u);
}"""


def build_blocks(services: Services) -> tuple[gr.Blocks, Callable[[], None]]:
    """The page, its panels each handed the parts of envhub they use; and what makes the default search's first page
    part of the page, to call once the catalog is ready."""
    settings, engine, endpoints = services.settings, services.engine, services.endpoints
    visitors = Visitors(services.identities, settings)
    sessions, tasksets, publisher, syncer = services.play, services.tasksets, services.publisher, services.syncer
    spaces, hf_endpoint = services.monitor.spaces, settings.hf_endpoint
    checker, tokens = services.checker, services.endpoint_tokens
    live = Live(endpoints, visitors, spaces, services.guard)
    runs = Runs(engine, services.evaluations, services.agents, endpoints, visitors)
    # The door's sessions of a run are looked up by their `run` column once the door keeps it.
    agent_runs = agent_run.AgentRuns(
        services.agent_runs,
        services.agents,
        endpoints.access,
        visitors,
        lambda run_id: [s.id for s in door_side(engine, run_id).sessions],
    )
    blocks = gr.Blocks(title="envhub", analytics_enabled=False, fill_width=True)
    with blocks:
        selected = gr.Textbox(visible=False, elem_id="selected-env")
        with gr.Row(equal_height=True):
            gr.HTML(HEADER)
            account = gr.HTML(elem_id="account")
        banner = status.build(settings)
        with gr.Tabs(selected="browse", elem_id="main-tabs") as tabs:
            with gr.Tab("Browse", id="browse", elem_id="tab-browse"):
                b = browse.build()
            with gr.Tab("Environment", id="detail", elem_id="tab-detail"):
                d = detail.build()
            with gr.Tab("Play", id="play", elem_id="tab-play") as play_tab:
                p = play_panel.build()
            with gr.Tab("Evaluate", id="evaluate", elem_id="tab-evaluate"):
                ev = evaluate_panel.build()
            with gr.Tab("Launch", id="launch", elem_id="tab-launch") as launch_tab:
                lp = launch.build(endpoints.backends())
            with gr.Tab("My endpoints", id="endpoints", elem_id="tab-endpoints") as endpoints_tab:
                mine = my_endpoints.build()
            with gr.Tab("Agent run", id="agent-run", elem_id="tab-agent-run"):
                ar = agent_run.build()
            with gr.Tab("Board", id="board", elem_id="tab-board") as board_tab:
                sb = submissions.build()
        browse.wire(engine, endpoints, b)
        search = (b.filters, b.outputs, lambda *values: browse.run_search(engine, endpoints, values, 0))
        status.wire(syncer, settings, visitors, banner, search)
        played = play.wire(engine, live, sessions, tasksets, settings.launch_timeout_s, p, selected)
        launch.wire(endpoints, visitors, lp, selected)
        evaluate.wire(runs, services.presets, services.evaluator, services.runner, hf_endpoint, ev, selected)
        publish.wire(publisher, visitors, d.publish, selected)
        agent_run.wire(agent_runs, ar)
        submissions.wire(engine, sb, board_tab)

        opened = [selected, tabs, lp.environment, ev.environment, ev.board, d.board]
        opened += [*d.outputs, *d.publish.outputs, p.url, *p.setup, d.statistical.report, d.statistical.presets]

        def open_environment(environment_id: str, request: gr.Request) -> dict[Any, Any]:
            return (
                {
                    selected: environment_id,
                    tabs: gr.Tabs(selected="detail"),
                    lp.environment: f"Launching **`{environment_id}`**" if environment_id else "",
                }
                | detail.show(engine, live, hf_endpoint, d, environment_id, request)
                | publish.show(engine, publisher, visitors, d.publish, environment_id, request)
                | evaluate.show(runs, ev, environment_id, request, d.board)
                | play.prepare(engine, live, sessions, p, environment_id, request)
                | {
                    d.statistical.report: statistics.latest_html(engine, environment_id),
                    d.statistical.presets: statistics.presets_update(services.statistics, visitors, request),
                }
            )

        def from_card(request: gr.Request, event: gr.EventData) -> dict[Any, Any]:
            tag = getattr(event, "tag", None)
            if isinstance(tag, str) and tag:  # a tag chip: filter by it (the filter's change searches again)
                return {b.tags: browse.tag_choices(engine, chosen=tag[:200])}
            return open_environment(str(getattr(event, "env", "")), request)

        refreshed = [*d.live_outputs, ev.tasks]

        async def refresh(request: gr.Request, environment_id: str) -> dict[Any, Any]:
            if not environment_id:
                return {output: gr.skip() for output in refreshed}
            return await detail.refresh(engine, live, tasksets, hf_endpoint, d, environment_id, request, [ev.tasks])

        def start_page(request: gr.Request, summary_shown: str, cards_shown: str) -> dict[Any, Any]:
            params = dict(request.query_params)
            q = str(params.get("q", ""))[:500]
            filters = [q, *browse.DEFAULT_FILTERS[1:]]
            values = dict(zip(b.outputs, browse.run_search(engine, endpoints, filters, 0), strict=True))
            if not q:
                browse.carry_first_page(blocks, b, values)
                if (values[b.summary], values[b.results]) == (summary_shown, cards_shown):
                    # The page came with these cards: a search typed meanwhile is not overwritten by them.
                    values |= {b.summary: gr.skip(), b.results: gr.skip(), b.page_label: gr.skip()}
            values |= {b.query: q} if q else {}  # nor is what was typed, when the link carries no words
            values |= {account: publish.account_html(visitors, visitors.caller(request))}
            environment_id = str(params.get("env", "")).strip()
            episode_id = str(params.get("episode", "")).strip()[:100]
            run_id = str(params.get("run", "")).strip()[:100]
            agent_run_id = str(params.get("agent_run", "")).strip()[:100]
            if agent_run_id:  # a harness run's link: its page
                shown_run = {ar.run_id: agent_run_id, ar.view: agent_runs.view(request, agent_run_id)}
                return values | shown_run | {tabs: gr.Tabs(selected="agent-run")}
            if run_id and not episode_id:  # a run's link: its environment, and the run with its first episode
                try:
                    opened_env = open_environment(runs.get(request, run_id).environment, request)
                except EnvhubError:
                    opened_env = {}  # open_run says the run is not found
                shown = evaluate.open_run(runs, ev, run_id, request)
                return values | opened_env | shown | {tabs: gr.Tabs(selected="evaluate")}
            if episode_id:  # a shared episode: its environment, and the episode in the viewer
                shown = evaluate.open_episode(runs, ev, episode_id, request)
                run = runs.store.find_run_of(episode_id)
                visible = run is not None and runs.shown(request)(run)  # a private endpoint's: its owner's only
                opened_env = open_environment(run.environment, request) if run is not None and visible else {}
                return values | opened_env | shown | {tabs: gr.Tabs(selected="evaluate")}
            if not environment_id:
                return values
            try:
                return values | open_environment(environment_id, request)
            except EnvhubError as exc:  # a link to a revision the catalog does not know: the page opens, and says so
                unknown = detail.not_found(live, d, html.escape(exc.message), request)
                return values | unknown | {selected: "", tabs: gr.Tabs(selected="detail")}

        viewer = [ev.episode_id, ev.episode, ev.step, ev.viewer]
        run_view = [ev.evaluation, ev.message, *ev.followed, *ev.form]

        def filters_and_banner() -> dict[Any, Any]:
            return {b.tags: browse.tag_choices(engine)} | status.show(syncer, banner)

        loaded = blocks.load(
            start_page,
            [b.summary, b.results],
            list(
                dict.fromkeys(
                    [
                        *b.outputs,
                        b.query,
                        account,
                        *opened,
                        *viewer,
                        *run_view,
                        ar.run_id,
                        ar.view,
                    ]
                )
            ),
            show_progress="hidden",
            queue=False,  # one request, not a join and an event stream: the first cards show a round trip sooner
        )
        # What a first look does without: the tag filter's counts and the sync banner, read once the cards show.
        loaded.then(filters_and_banner, None, [b.tags, *banner.outputs], show_progress="hidden", queue=False)
        loaded.then(refresh, [selected], refreshed, show_progress="hidden")
        b.results.click(from_card, None, [*opened, b.tags], show_progress="hidden").then(
            refresh, [selected], refreshed, show_progress="hidden"
        ).then(None, [selected], None, js=SHOW_URL)
        for event in played.events:  # a launch or a connection may reveal the schemas, tools and tasks
            event.then(refresh, [selected], refreshed, show_progress="hidden")

        async def reopen(request: gr.Request, environment_id: str) -> dict[Any, Any]:
            return await played.reopen(request, environment_id)

        d.play.click(lambda: gr.Tabs(selected="play"), None, tabs)
        play_tab.select(reopen, [selected], [p.url, *p.setup], show_progress="minimal")

        async def play_endpoint(request: gr.Request, endpoint: Endpoint) -> dict[Any, Any]:
            url = visitors.endpoint_url(request, endpoint.id)
            shown = await asyncio.to_thread(open_environment, endpoint.environment, request)
            shown[tabs] = gr.Tabs(selected="play")
            menu = await play.url_menu(live, await read_environment(engine, endpoint.environment), request, url)
            return shown | {p.url: menu} | await played.connect(request, endpoint.environment, url)

        my_endpoints.wire(endpoints, visitors, mine, endpoints_tab, play_endpoint, opened).then(
            refresh, [selected], refreshed, show_progress="hidden"
        )
        d.launch.click(lambda: gr.Tabs(selected="launch"), None, tabs)

        def run_from_detail(request: gr.Request, event: gr.EventData) -> dict[Any, Any]:
            shown = evaluate.open_run(runs, ev, str(getattr(event, "run", "")), request)
            return shown | {tabs: gr.Tabs(selected="evaluate")}

        d.board.click(run_from_detail, None, list(dict.fromkeys([tabs, *run_view, *viewer])), show_progress="hidden")
        d.evaluate.click(lambda: gr.Tabs(selected="evaluate"), None, tabs)

        async def wake(request: gr.Request, environment_id: str) -> dict[Any, Any]:
            return await detail.wake(engine, live, spaces, d, environment_id, request)

        d.wake.click(wake, [selected], [d.status, d.wake], show_progress="hidden")

        async def run_quality(request: gr.Request, environment_id: str) -> AsyncIterator[str]:
            yield '<p class="muted">Running a quality report: seeded episodes against the server, up to a minute…</p>'
            yield await quality.run_report(engine, endpoints, checker, tokens, visitors, environment_id, request)

        d.run_quality.click(run_quality, [selected], [d.quality], show_progress="minimal")

        async def run_statistics(request: gr.Request, environment_id: str, presets: list[str]) -> AsyncIterator[str]:
            async for shown in statistics.run(engine, services.statistics, visitors, environment_id, presets, request):
                yield shown

        d.statistical.run.click(run_statistics, [selected, d.statistical.presets], [d.statistical.report])

        def show_endpoints(request: gr.Request, endpoint_id: str) -> dict[Any, Any]:
            return launch.watch(endpoints, visitors, lp, endpoint_id, request)

        launch_tab.select(show_endpoints, [lp.endpoint], lp.watched, show_progress="hidden")
        # The followed endpoint's URL shows once it runs (and goes once it stops): the environment page's Connect
        # panel follows without a reload.
        lp.url.change(refresh, [selected], refreshed, show_progress="hidden")

        async def tab_closed(request: gr.Request) -> None:
            await sessions.close(request.session_hash)

        blocks.unload(tab_closed)

        def carry_first_page() -> None:
            first_page = browse.run_search(engine, endpoints, browse.DEFAULT_FILTERS, 0)
            browse.carry_first_page(blocks, b, dict(zip(b.outputs, first_page, strict=True)))

    return blocks, carry_first_page


QUEUE_POLL_S = 0.01
# Gradio's status trackers tell screen readers an event completed with the key `common.complete`, which its own
# locales lack, so the key itself was read out; other locales fall back to English.
TRANSLATIONS = gr.I18n(en={"common.complete": "Done"})


def mount_ui(app: FastAPI, services: Services) -> Callable[[], None]:
    """Serve the UI at /; call it after every other route, since the mount catches all paths. What it returns is to
    be called once envhub has started (its catalog ready): it puts the first cards into the page."""
    app.add_middleware(FrontendAssets, directory=Path(str(importlib.resources.files("gradio"))) / FRONTEND_BUILD)

    sessions = services.play

    @app.get(EPISODE_ROUTE, include_in_schema=False)
    def download_episode(token: str) -> Response:
        session = sessions.find_by_token(token)
        if session is None:
            return PlainTextResponse("no such episode: it ended with its browser tab", status_code=404)
        return Response(
            session.episode.to_jsonl(),
            media_type="application/x-ndjson",
            headers={"content-disposition": f'attachment; filename="{episode_filename(session.environment)}"'},
        )

    ready: list[Callable[[], None]] = []

    def build() -> None:
        blocks, carry_first_page = build_blocks(services)
        ready.append(carry_first_page)
        blocks.queue(default_concurrency_limit=None)
        # Gradio summarises its event log with pandas after every event, for a monitoring page
        # envhub does not serve; that costs milliseconds per click (and warns on pandas 3).
        blocks._queue.ANAYLTICS_CACHE_FREQUENCY = 1_000_000_000
        # Its queue looks for new events every millisecond when idle, a thousand wake-ups a second on the loop the
        # gateway relays on (4 % of a core, bench/RESULTS.md); every 10 ms is still no wait a click would notice.
        blocks._queue.sleep_when_free = QUEUE_POLL_S
        gr.mount_gradio_app(
            app, blocks, path="/", css=CSS, theme=THEME, footer_links=["gradio", "settings"], i18n=TRANSLATIONS
        )

    _in_event_loop(build)
    return ready[0]


def _in_event_loop(build: Callable[[], None]) -> None:
    """Run build with an event loop running: outside one, Gradio's app makes loops of its own
    for its locks, sets them as the thread's loop and never closes them."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:

        async def run() -> None:
            build()

        with asyncio.Runner() as runner:
            runner.run(run())
    else:
        build()
