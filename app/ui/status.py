"""The page's sync banner: the last Hub sync failed (when, why, what the offline catalog holds), with Retry for
whoever may start a sync from the page, followed until the new sync ends."""

import html
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import gradio as gr
from sqlmodel import Session

from app.settings import Settings
from app.ui.requests import Visitors
from catalog.search import CatalogExtent, catalog_extent
from catalog.sync import SYNC_RUNNING, Syncer
from core.errors import EnvhubError

RetryRule = Literal["anyone", "token", "nobody"]


def retry_rule(settings: Settings) -> RetryRule:
    """Who may retry a sync from the page: the holder of the admin token where there is one; anyone on a server
    without sign-in that is not a Space (one's own machine, as `make run` serves it); else nobody (the CLI can)."""
    if settings.admin_token is not None and settings.admin_token.get_secret_value():
        return "token"
    if settings.auth_mode == "off" and settings.space_id is None:
        return "anyone"
    return "nobody"


@dataclass(frozen=True)
class SyncBanner:
    row: gr.Column
    text: gr.HTML
    token: gr.Textbox
    retry: gr.Button
    timer: gr.Timer
    rule: RetryRule

    @property
    def outputs(self) -> list[Any]:
        return [self.row, self.text, self.retry, self.timer]


def build(settings: Settings) -> SyncBanner:
    rule = retry_rule(settings)
    with gr.Column(visible=False, elem_id="sync-status") as row:
        text = gr.HTML(elem_id="sync-banner")
        with gr.Row(equal_height=True, visible=rule != "nobody"):
            token = gr.Textbox(
                label="Admin token",
                show_label=False,
                placeholder="admin token",
                type="password",
                visible=rule == "token",
                scale=0,
                min_width=240,
                container=False,
                elem_id="sync-token",
            )
            retry = gr.Button("↻ Retry the sync", size="sm", scale=0, min_width=160, elem_id="sync-retry")
    return SyncBanner(row, text, token, retry, gr.Timer(1.0, active=False), retry_rule(settings))


def syncing(syncer: Syncer) -> bool:
    """A sync runs now, here or on another instance of the catalog."""
    return syncer.running or SYNC_RUNNING in syncer.leases.live()


def failed_html(extent: CatalogExtent, rule: RetryRule) -> str:
    run = extent.last_sync
    assert run is not None
    when = f"{(run.finished_at or run.started_at):%Y-%m-%d %H:%M} UTC"
    noun = "environment" if extent.total == 1 else "environments"
    hints = {
        "anyone": "",
        "token": " Retrying takes the admin token (ENVHUB_ADMIN_TOKEN).",
        "nobody": " The server's operator can retry with <code>python -m app sync</code>, or set "
        "ENVHUB_ADMIN_TOKEN to retry from this page.",
    }
    return (
        '<div class="banner banner-bad" role="alert"><b>The Hub could not be synced.</b> '
        f"The last sync, at {when}, failed: {html.escape(run.error or 'no reason was recorded')}. "
        f"Until one succeeds, envhub serves its offline catalog: {extent.total:,} {noun} "
        f"({html.escape(extent.holdings())}).{hints[rule]}</div>"
    )


SYNCING = '<div class="banner banner-busy" role="status"><b>Syncing with the Hub…</b></div>'


def show(syncer: Syncer, banner: SyncBanner, note: str = "") -> dict[Any, Any]:
    """What the banner says now: a sync under way, the last one's failure, or nothing (hidden)."""
    if syncing(syncer):
        return {banner.row: gr.Column(visible=True), banner.text: SYNCING, banner.retry: gr.Button(interactive=False)}
    with Session(syncer.engine) as session:
        extent = catalog_extent(session)
    if not extent.sync_failed:
        return {banner.row: gr.Column(visible=False), banner.text: ""}
    problem = f'<p class="problem">{html.escape(note)}</p>' if note else ""
    return {
        banner.row: gr.Column(visible=True),
        banner.text: failed_html(extent, banner.rule) + problem,
        banner.retry: gr.Button(interactive=True),
    }


def wire(
    syncer: Syncer,
    settings: Settings,
    visitors: Visitors,
    banner: SyncBanner,
    after: tuple[Sequence[Any], Sequence[Any], Callable[..., Any]],
) -> None:
    """Retry and follow the sync; once it ends, `after` (inputs, outputs, function) runs: the search again."""
    inputs, outputs, search = after

    def retry(request: gr.Request, token: str) -> dict[Any, Any]:
        rule = banner.rule
        admin = settings.admin_token
        try:
            visitors.acting_caller(request)
            if rule == "nobody":
                return show(syncer, banner, "Retrying is off here; the operator can run python -m app sync.")
            if rule == "token" and (
                admin is None or not secrets.compare_digest((token or "").encode(), admin.get_secret_value().encode())
            ):
                return show(syncer, banner, "That is not this server's admin token.") | {banner.token: ""}
            syncer.start()
        except EnvhubError as exc:
            return show(syncer, banner, exc.message)
        return show(syncer, banner) | {banner.token: "", banner.timer: gr.Timer(active=True)}

    def follow(*values: Any) -> dict[Any, Any]:
        if syncing(syncer):
            return show(syncer, banner)
        found = dict(zip(outputs, search(*values), strict=True))
        return show(syncer, banner) | found | {banner.timer: gr.Timer(active=False)}

    banner.retry.click(retry, [banner.token], [*banner.outputs, banner.token], show_progress="hidden")
    banner.timer.tick(follow, list(inputs), [*banner.outputs, *outputs], show_progress="hidden")
