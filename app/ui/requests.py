"""What a UI event's request says: who clicked, from which site's page, and where the page was reached."""

from dataclasses import dataclass
from urllib.parse import urlsplit

import gradio as gr
from starlette.requests import HTTPConnection

from app.auth.callers import Identities
from app.settings import Settings
from app.urls import connection_base, endpoint_url, public_base
from core.callers import ANONYMOUS, Caller
from core.errors import ForbiddenError
from core.headers import page_origin, reached_hosts
from gateway.gate import client_of

__all__ = ["Visitors", "connection_of"]


def _headers(request: gr.Request | None) -> dict[str, str]:
    return {k.lower(): v for k, v in dict(getattr(request, "headers", {}) or {}).items()}


def connection_of(request: gr.Request | None) -> HTTPConnection | None:
    """The HTTP request or WebSocket to envhub underneath a Gradio event, when Gradio gives it."""
    inner = getattr(request, "request", None) if request is not None else None
    return inner if isinstance(inner, HTTPConnection) else None


@dataclass(frozen=True)
class Visitors:
    """Who is on the page, and where they reached envhub: what every panel asks of an event's request."""

    identities: Identities
    settings: Settings  # the public URL, where a Space or a proxy serves envhub, and whether people sign in

    @property
    def sign_in(self) -> bool:
        return self.settings.auth_mode != "off"

    def caller(self, request: gr.Request | None) -> Caller:
        """Who clicked: the session cookie (or bearer token) the browser sent with the event."""
        if request is None:
            return ANONYMOUS
        cookies = dict(getattr(request, "cookies", {}) or {})
        return self.identities.resolve(_headers(request), cookies)

    def client(self, request: gr.Request | None, caller: Caller) -> str:
        """Whom the visitor's share of a limit counts against, as for the gateway's queue: the signed-in user (the
        request's caller), else the address."""
        connection = connection_of(request)
        peer = connection.client.host if connection is not None and connection.client is not None else ""
        return client_of(_headers(request), peer, caller.name, behind_proxy=self.settings.space_id is not None)

    def acting_caller(self, request: gr.Request | None) -> Caller:
        """The caller of a click that changes something: refused when another site's page sent it."""
        headers = _headers(request)
        page = page_origin(headers)
        if page is not None and page.geturl() and page.netloc.lower() not in _hosts(headers, self.settings.public_url):
            raise ForbiddenError("this action came from another site's page; use envhub's own page")
        return self.caller(request)

    def base(self, request: gr.Request | None) -> str:
        """Where users reach envhub, as the page's request says (the one rule of app.urls)."""
        connection = connection_of(request)
        if connection is not None:
            return connection_base(self.settings, connection)
        headers = _headers(request)
        return public_base(
            self.settings, headers.get("x-forwarded-proto", "http"), headers.get("host", "127.0.0.1:7860")
        )

    def endpoint_url(self, request: gr.Request | None, endpoint_id: str) -> str:
        return endpoint_url(self.base(request), endpoint_id)


def _hosts(headers: dict[str, str], public_url: str | None) -> set[str]:
    hosts = set(reached_hosts(headers))
    if public_url:
        hosts.add(urlsplit(public_url).netloc.lower())
    return hosts
