"""What every UI panel works with: the catalog, the endpoint manager and the play sessions."""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

import gradio as gr
from sqlalchemy import Engine
from sqlmodel import Session
from starlette.requests import HTTPConnection

from app.auth import ANONYMOUS, Caller, Identities
from app.gateway import gateway_url
from app.settings import Settings
from app.ui.live import live_session
from app.ui.sessions import PlaySessions
from catalog.models import EnvironmentDetail
from core.errors import ForbiddenError
from core.outbound import OutboundGuard, OutboundSession
from hosting.endpoints import EndpointManager
from hosting.models import Endpoint, EndpointStatus
from hosting.monitor import HealthMonitor
from hosting.publish import Publisher
from hosting.routing import GATEWAY_PREFIX


@dataclass(frozen=True)
class UiContext:
    settings: Settings
    engine: Engine
    endpoints: EndpointManager
    sessions: PlaySessions
    guard: OutboundGuard
    monitor: HealthMonitor
    identities: Identities
    publisher: Publisher

    def caller(self, request: gr.Request | None) -> Caller:
        """Who clicked: the session cookie (or bearer token) the browser sent with the event."""
        if request is None:
            return ANONYMOUS
        headers = {k.lower(): v for k, v in dict(getattr(request, "headers", {}) or {}).items()}
        cookies = dict(getattr(request, "cookies", {}) or {})
        return self.identities.resolve(headers, cookies)

    def acting_caller(self, request: gr.Request | None) -> Caller:
        """The caller of a click that changes something: refused when another site's page sent it."""
        if request is not None:
            headers = {k.lower(): v for k, v in dict(getattr(request, "headers", {}) or {}).items()}
            origin = headers.get("origin")
            if origin and urlsplit(origin).netloc not in _hosts(headers, self.settings.public_url):
                raise ForbiddenError("this action came from another site's page; use envhub's own page")
        return self.caller(request)

    @contextmanager
    def db(self) -> Iterator[Session]:
        with Session(self.engine) as session:
            yield session

    def base_url(self, request: gr.Request | None) -> str:
        """Where users reach envhub: the configured public URL, else the address this page came from."""
        if self.settings.public_url:
            return self.settings.public_url.rstrip("/")
        inner = getattr(request, "request", None) if request is not None else None
        if inner is not None:
            return str(inner.base_url).rstrip("/")
        headers = dict(request.headers) if request is not None else {}
        scheme = headers.get("x-forwarded-proto", "http")
        return f"{scheme}://{headers.get('host', '127.0.0.1:7860')}"

    def endpoint_url(self, request: gr.Request | None, endpoint_id: str) -> str:
        return f"{self.base_url(request)}{GATEWAY_PREFIX}/{endpoint_id}"

    def own_gateway(self, request: gr.Request | None) -> str | None:
        """envhub's gateway on the address this server listens on, where it reaches its own endpoints."""
        inner = getattr(request, "request", None) if request is not None else None
        return gateway_url(inner, "") if isinstance(inner, HTTPConnection) else None

    def connection_url(self, url: str, request: gr.Request | None) -> str:
        """Where envhub connects for a live URL: its own endpoints through its gateway on its own
        address (the Host header a page came with names nothing envhub trusts), others as given."""
        own, gateway = self.endpoint_url(request, ""), self.own_gateway(request)
        return gateway + url.removeprefix(own) if gateway is not None and url.startswith(own) else url

    async def outbound(self, environment: EnvironmentDetail, request: gr.Request | None) -> OutboundSession:
        """The outbound session to reach this environment's live URLs with: envhub's own gateway
        trusted, the rest through the guard, and the Hub token for a private Space's host."""
        credentials = await self.monitor.space_credentials(environment.id)
        gateway = self.own_gateway(request)
        return live_session(self.guard, *([gateway] if gateway else []), credentials=credentials)

    def running_endpoint(self, environment_id: str) -> Endpoint | None:
        """The newest running endpoint of an environment."""
        return next(
            (
                e
                for e in self.endpoints.list(active_only=True)
                if e.environment == environment_id and e.status == EndpointStatus.RUNNING
            ),
            None,
        )

    def live_urls(self, environment: EnvironmentDetail, request: gr.Request | None) -> list[str]:
        """URLs the playground may connect to: this environment's running endpoints, then its Space host."""
        urls = [
            self.endpoint_url(request, e.id)
            for e in self.endpoints.list(active_only=True)
            if e.environment == environment.id and e.status == EndpointStatus.RUNNING
        ]
        if environment.host:
            urls.append(environment.host.rstrip("/"))
        return urls

    def active_endpoint_ids(self) -> dict[str, str]:
        """environment id -> status of its newest active endpoint."""
        found: dict[str, str] = {}
        for endpoint in self.endpoints.list(active_only=True):
            found.setdefault(endpoint.environment, endpoint.status.value)
        return found


def _hosts(headers: dict[str, str], public_url: str | None) -> set[str]:
    hosts = {headers.get("host", ""), headers.get("x-forwarded-host", "")}
    if public_url:
        hosts.add(urlsplit(public_url).netloc)
    return {h.split(",")[0].strip() for h in hosts if h}
