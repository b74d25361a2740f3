"""The signed-in account in the page header, and 'Deploy as Space' on a template's page: the Space is
created in the user's namespace with their token, followed through its build, then checked."""

import asyncio
import html
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import gradio as gr
from sqlalchemy import Engine
from sqlmodel import Session

from app.auth import Caller
from app.auth.pages import logout_form
from app.ui.requests import Visitors
from app.usecases.publish import Publisher
from catalog.models import Source
from catalog.store import find_environment
from core.errors import EnvhubError
from hosting.models import Publication, PublicationStatus

_BADGE = {
    PublicationStatus.BUILDING: "busy",
    PublicationStatus.CHECKING: "busy",
    PublicationStatus.RUNNING: "ok",
    PublicationStatus.FAILED: "bad",
}


def login_link(target: str = "/", text: str = "Sign in with Hugging Face") -> str:
    # _top: inside a Space's iframe the provider's page must not load in the frame, nor the cookie be third-party.
    return f'<a href="/auth/login?next={quote(target, safe="")}" target="_top" id="sign-in">{html.escape(text)}</a>'


def sign_in_note(sign_in: bool, environment_id: str, why: str, doing: str = "Deploying") -> str:
    """What to do before something that acts with the user's Hub token (deploying, pushing): sign in where sign-in
    is on; where it is off, how to turn it on."""
    if not sign_in:
        return (
            f"<p class='muted'>{doing} needs sign-in with Hugging Face, which is off on this server: it acts with "
            "your Hub token. To do it from here, start envhub with <code>ENVHUB_DEV_LOGIN=true</code> and your write "
            "token in <code>HF_TOKEN</code> (or with OAuth, as on a Space).</p>"
        )
    return f"<p>{login_link(f'/?env={environment_id}')} {why}</p>"


def account_html(visitors: Visitors, caller: Caller) -> str:
    if caller.user is not None:
        name = html.escape(caller.user.name)
        out = logout_form(visitors.identities.store.csrf_token(caller.session)) if caller.session else ""
        return f'<div class="account">Signed in as <b id="account-name">{name}</b> {out}</div>'
    if not visitors.sign_in:
        return ""
    return f'<div class="account">{login_link()}</div>'


@dataclass(frozen=True)
class Publish:
    panel: gr.Column
    name: gr.Textbox
    start: gr.Button
    status: gr.HTML
    publication: gr.State
    timer: gr.Timer

    @property
    def outputs(self) -> list[Any]:
        return [self.panel, self.status, self.publication, self.timer]


def build() -> Publish:
    with gr.Column(visible=False, elem_id="publish-panel") as panel:
        gr.Markdown("**Deploy as Space** — a copy of this template as a Space of your own on the Hub.")
        name = gr.Textbox(label="Space name", placeholder="the template's name", max_lines=1, elem_id="publish-name")
        start = gr.Button("🤗 Deploy as Space", elem_id="publish-start")
        status = gr.HTML(elem_id="publish-status")
    return Publish(panel, name, start, status, gr.State(""), gr.Timer(2.0, active=False))


def show(
    engine: Engine,
    publisher: Publisher,
    visitors: Visitors,
    publish: Publish,
    environment_id: str,
    request: gr.Request | None,
) -> dict[Any, Any]:
    """Only templates are deployed; the panel shows the newest deployment of this one by this user."""
    with Session(engine) as session:
        environment = find_environment(session, environment_id) if environment_id else None
    is_template = environment is not None and environment.source == Source.TEMPLATE
    caller = visitors.caller(request)
    latest = (
        publisher.list(environment=environment_id, owner=caller.name, limit=1) if is_template and caller.name else []
    )
    if latest:
        status = status_html(latest[0])
    elif caller.user is None:
        status = sign_in_note(visitors.sign_in, environment_id, "to deploy it in your namespace.")
    else:
        status = f"<p class='muted'>It becomes <code>{html.escape(caller.user.name)}/…</code> on the Hub.</p>"
    following = bool(latest) and latest[0].status in (PublicationStatus.BUILDING, PublicationStatus.CHECKING)
    return {
        publish.panel: gr.Column(visible=is_template),
        publish.status: status,
        publish.publication: latest[0].id if latest else "",
        publish.timer: gr.Timer(active=following),
    }


def status_html(publication: Publication) -> str:
    kind = _BADGE.get(publication.status, "info")
    space = html.escape(publication.space)
    parts = [
        f'<span class="badge badge-{kind}">{html.escape(publication.status.value)}</span> '
        f'<a href="{html.escape(publication.space_url)}" target="_blank" rel="noopener" id="publish-space">{space}</a>',
        f"<p>{html.escape(publication.message)}</p>",
    ]
    if publication.url:
        url = html.escape(publication.url)
        parts.append(f'<p>URL: <code id="publish-url">{url}</code></p>')
    if publication.check_id is not None:
        verdict = "✓ conforms" if publication.conforms else "✗ does not conform"
        parts.append(
            f'<p id="publish-conformance">{verdict} · '
            f'<a href="/api/checks/{publication.check_id}" target="_blank">report</a></p>'
        )
    return '<div class="publication">' + "".join(parts) + "</div>"


def wire(publisher: Publisher, visitors: Visitors, publish: Publish, selected: gr.Textbox) -> None:
    async def start(request: gr.Request, environment_id: str, name: str) -> dict[Any, Any]:
        try:
            caller = await asyncio.to_thread(visitors.acting_caller, request)
            if caller.user is None or caller.token is None:
                note = sign_in_note(visitors.sign_in, environment_id, "first: the Space is made in your namespace.")
                return {publish.status: note}
            publication = await publisher.publish(environment_id, caller.user.name, caller.token, name.strip() or None)
        except EnvhubError as exc:
            return {publish.status: f'<p class="problem">Not deployed: {html.escape(exc.message)}</p>'}
        return {
            publish.status: status_html(publication),
            publish.publication: publication.id,
            publish.timer: gr.Timer(active=True),
        }

    def tick(publication_id: str) -> dict[Any, Any]:
        if not publication_id:
            return {publish.timer: gr.Timer(active=False)}
        try:
            publication = publisher.get(publication_id)
        except EnvhubError as exc:
            return {publish.status: html.escape(exc.message), publish.timer: gr.Timer(active=False)}
        following = publication.status in (PublicationStatus.BUILDING, PublicationStatus.CHECKING)
        return {publish.status: status_html(publication), publish.timer: gr.Timer(active=following)}

    publish.start.click(start, [selected, publish.name], [publish.status, publish.publication, publish.timer])
    publish.timer.tick(tick, [publish.publication], [publish.status, publish.timer], show_progress="hidden")
