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


def failed_html(extent: CatalogExtent, rule: RetryRule, retried: bool = False) -> str:
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
    head = "The retry failed." if retried else "The Hub could not be synced."
    why = html.escape(run.error or "no reason was recorded")
    return (
        f'<div class="banner banner-bad" role="alert" data-sync="failed"{" data-retried" if retried else ""}>'
        f"<b>{head}</b> "
        f'The last sync, at {when}, failed: <span class="sync-why">{why}</span>. '
        f"Until one succeeds, envhub serves its offline catalog: {extent.total:,} {noun} "
        f"({html.escape(extent.holdings())}).{hints[rule]}</div>"
    )


SYNCING = (
    '<div class="banner banner-busy" role="status" data-sync="started"><b>Syncing with the Hub…</b> '
    "Started; this says so when it ends.</div>"
)


def synced_html(extent: CatalogExtent) -> str:
    return (
        '<div class="banner banner-ok" role="status" data-sync="done"><b>Synced with the Hub.</b> '
        f"{html.escape(extent.describe())}</div>"
    )


def show(syncer: Syncer, banner: SyncBanner, note: str = "", retried: bool = False) -> dict[Any, Any]:
    """What the banner says now: a sync under way, the last one's failure, or nothing (hidden); after a retry
    from this page, how the retried sync ended: done, or failed with why."""
    if syncing(syncer):
        return {banner.row: gr.Column(visible=True), banner.text: SYNCING, banner.retry: gr.Button(interactive=False)}
    with Session(syncer.engine) as session:
        extent = catalog_extent(session)
    if not extent.sync_failed and retried:
        return {
            banner.row: gr.Column(visible=True),
            banner.text: synced_html(extent),
            banner.retry: gr.Button(visible=False),
        }
    if not extent.sync_failed:
        return {banner.row: gr.Column(visible=False), banner.text: ""}
    problem = f'<p class="problem">{html.escape(note)}</p>' if note else ""
    return {
        banner.row: gr.Column(visible=True),
        banner.text: failed_html(extent, banner.rule, retried) + problem,
        banner.retry: gr.Button(interactive=True, visible=True),
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
        return show(syncer, banner, retried=True) | found | {banner.timer: gr.Timer(active=False)}

    banner.retry.click(retry, [banner.token], [*banner.outputs, banner.token], show_progress="hidden")
    banner.timer.tick(follow, list(inputs), [*banner.outputs, *outputs], show_progress="hidden")
