"""My endpoints: the running endpoints of whoever looks (all of them for the admin), each with its environment,
revision, URL to copy, pool and sessions, and Stop and Open in Play; and why a launch was refused, in its words."""

import asyncio
import html
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gradio as gr

from app.ui.requests import Visitors
from app.ui.wording import plural
from app.usecases.your_endpoint import yours
from core.callers import Caller
from core.errors import EnvhubError, TooManyRequestsError
from hosting.endpoints import EndpointManager
from hosting.models import Endpoint, EndpointStatus, ReplicaStatus

# A click on a row's button sends its action and endpoint; copying the URL happens in the page alone.
ROW_CLICKS = """
element.addEventListener('click', (event) => {
  const button = event.target.closest('button[data-action]');
  if (!button) return;
  if (button.dataset.action === 'copy') {
    navigator.clipboard?.writeText(button.dataset.url);
    button.textContent = 'Copied';
    setTimeout(() => { button.textContent = 'Copy'; }, 1500);
    return;
  }
  trigger('click', {action: button.dataset.action, endpoint: button.dataset.endpoint});
});
"""
_BADGE = {EndpointStatus.STARTING: "busy", EndpointStatus.RUNNING: "ok", EndpointStatus.STOPPING: "busy"}
_CHANGING = (EndpointStatus.STARTING, EndpointStatus.STOPPING)


def launch_refusal(endpoints: EndpointManager, caller: Caller, exc: EnvhubError) -> str:
    """Why a launch was refused, in the page's words: at the limit of endpoints, the panel to stop one in."""
    limit = endpoints.per_owner
    if isinstance(exc, TooManyRequestsError) and len(yours(endpoints, caller)) >= limit:
        return (
            f"you have {plural(limit, 'endpoint')} running, the most this server allows: stop one "
            "in **My endpoints**, or open one of them in Play."
        )
    return exc.message


@dataclass(frozen=True)
class MyEndpoints:
    listing: gr.HTML
    message: gr.Markdown
    timer: gr.Timer

    @property
    def outputs(self) -> list[Any]:
        return [self.listing, self.timer]


def build() -> MyEndpoints:
    gr.Markdown(
        "Your running endpoints. Their URLs hold until you stop them (or they idle out); "
        "**Launch locally** in Play reuses the one of the same environment and revision."
    )
    message = gr.Markdown(elem_id="my-endpoints-message")
    listing = gr.HTML(elem_id="my-endpoints", js_on_load=ROW_CLICKS)
    return MyEndpoints(listing, message, gr.Timer(2.0, active=False))


def _pool(endpoints: EndpointManager, endpoint: Endpoint) -> str:
    pool = endpoints.pool_of(endpoint)
    ready = sum(r.status == ReplicaStatus.READY for r in pool.replicas)
    return f"{plural(ready, 'replica')} · {pool.sessions}/{pool.capacity} sessions"


def listing_html(endpoints: EndpointManager, visitors: Visitors, request: gr.Request | None) -> str:
    found = yours(endpoints, visitors.caller(request))
    if not found:
        return (
            '<p class="muted" id="no-endpoints">No endpoints running. Open an environment and press '
            "<b>Launch locally</b> in Play, or launch one with options in the Launch tab.</p>"
        )
    rows = []
    for e in found:
        url = visitors.endpoint_url(request, e.id)
        running = e.status == EndpointStatus.RUNNING
        ident = f'data-endpoint="{html.escape(e.id, quote=True)}"'
        revision = f"<code>{html.escape(e.revision[:12])}</code>" if e.revision else '<span class="muted">–</span>'
        rows.append(
            f'<tr data-endpoint="{html.escape(e.id, quote=True)}">'
            f"<td><b>{html.escape(e.environment)}</b><br><code class='muted'>{html.escape(e.id)}</code> · "
            f"{html.escape(e.backend.value)}</td><td>{revision}</td>"
            f'<td><span class="badge badge-{_BADGE.get(e.status, "info")}">{html.escape(e.status.value)}</span></td>'
            f'<td class="endpoint-url"><code>{html.escape(url)}</code> '
            f'<button class="row-action" data-action="copy" data-url="{html.escape(url, quote=True)}">Copy</button>'
            f"</td><td>{html.escape(_pool(endpoints, e))}</td><td class='row-actions'>"
            + (f'<button class="row-action" data-action="play" {ident}>▶ Open in Play</button>' if running else "")
            + f'<button class="row-action stop" data-action="stop" {ident}>■ Stop</button></td></tr>'
        )
    head = "<tr><th>environment</th><th>revision</th><th>status</th><th>URL</th><th>pool</th><th></th></tr>"
    return f'<table class="my-endpoints"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def show(
    endpoints: EndpointManager, visitors: Visitors, panel: MyEndpoints, request: gr.Request | None
) -> dict[Any, Any]:
    """The listing, followed every few seconds while one of the endpoints starts or stops."""
    changing = any(e.status in _CHANGING for e in yours(endpoints, visitors.caller(request)))
    return {panel.listing: listing_html(endpoints, visitors, request), panel.timer: gr.Timer(active=changing)}


def stop(
    endpoints: EndpointManager, visitors: Visitors, panel: MyEndpoints, request: gr.Request, endpoint_id: str
) -> dict[Any, Any]:
    try:
        endpoints.stop(endpoint_id, visitors.acting_caller(request))
    except EnvhubError as exc:
        return {panel.message: f"**Not stopped:** {exc.message}"} | show(endpoints, visitors, panel, request)
    return {panel.message: f"Stopped `{endpoint_id}`."} | show(endpoints, visitors, panel, request)


def wire(
    endpoints: EndpointManager,
    visitors: Visitors,
    panel: MyEndpoints,
    tab: gr.Tab,
    play: Callable[[gr.Request, Endpoint], Awaitable[dict[Any, Any]]],
    opened: Sequence[Any],
) -> Any:
    """Refresh on opening the tab and while endpoints change; a row's Stop stops it, its Open in Play calls `play`
    (whose outputs are `opened`). Returns the click event, which the page follows."""

    def refresh(request: gr.Request) -> dict[Any, Any]:
        return show(endpoints, visitors, panel, request)

    async def act(request: gr.Request, event: gr.EventData) -> dict[Any, Any]:
        action, endpoint_id = str(getattr(event, "action", "")), str(getattr(event, "endpoint", ""))
        if action == "stop":
            return await asyncio.to_thread(stop, endpoints, visitors, panel, request, endpoint_id)
        try:
            endpoint = await asyncio.to_thread(endpoints.get, endpoint_id)
        except EnvhubError as exc:
            return {panel.message: exc.message} | await asyncio.to_thread(show, endpoints, visitors, panel, request)
        return {panel.message: ""} | await play(request, endpoint)

    tab.select(refresh, None, panel.outputs, show_progress="hidden")
    panel.timer.tick(refresh, None, panel.outputs, show_progress="hidden")
    outputs = list(dict.fromkeys([panel.message, *panel.outputs, *opened]))
    return panel.listing.click(act, None, outputs, show_progress="hidden")
