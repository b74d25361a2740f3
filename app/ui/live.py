"""Reaching a live environment from the UI: one outbound session per tab, pinned to the address its guard checked.

What the environment says about itself is read through it (envclient.interface); every
request and WebSocket of the session then goes to that address.
"""

import asyncio
from dataclasses import dataclass

import gradio as gr

from app.ui.requests import Visitors, connection_of
from app.urls import own_gateway
from catalog.models import EnvironmentDetail
from catalog.space_health import SpaceHealth
from core.errors import RefusedURLError
from core.outbound import OutboundGuard, OutboundSession, live_session
from hosting.endpoints import EndpointManager
from hosting.models import EndpointStatus, PoolPublic


async def outbound_refusal(outbound: OutboundSession, url: str) -> str | None:
    """Why the session may not connect to a URL, or None; the URL's host is pinned from here on."""
    try:
        await outbound.pin(outbound.guard.normalize(url))
    except RefusedURLError as exc:
        return exc.message
    return None


@dataclass(frozen=True)
class Live:
    """What the page reaches live environments with: their endpoints here, their Spaces' hosts, the guard."""

    endpoints: EndpointManager
    visitors: Visitors
    spaces: SpaceHealth  # the Hub token for a private Space's host
    guard: OutboundGuard

    def urls(self, environment: EnvironmentDetail, request: gr.Request | None) -> list[str]:
        """URLs the playground may connect to: this environment's running endpoints, then its Space host."""
        urls = [
            self.visitors.endpoint_url(request, e.id)
            for e in self.endpoints.list(active_only=True)
            if e.environment == environment.id and e.status == EndpointStatus.RUNNING
        ]
        if environment.host:
            urls.append(environment.host.rstrip("/"))
        return urls

    async def read_urls(self, environment: EnvironmentDetail, request: gr.Request | None) -> list[str]:
        """`urls`, for an async handler: the endpoints are read off the event loop."""
        return await asyncio.to_thread(self.urls, environment, request)

    def running_pool(self, environment_id: str) -> tuple[PoolPublic | None, bool]:
        """The pool of the environment's newest running endpoint, the first of its live URLs, and whether that
        endpoint is private (its URL answers only a bearer of its token)."""
        endpoint = self.endpoints.running_endpoint(environment_id)
        if endpoint is None:
            return None, False
        pool = self.endpoints.pool_of(endpoint)
        return pool, endpoint.private

    def connection_url(self, url: str, request: gr.Request | None) -> str:
        """Where envhub connects for a live URL: its own endpoints through its gateway on its own
        address (the Host header a page came with names nothing envhub trusts), others as given."""
        own, gateway = self.visitors.endpoint_url(request, ""), _own_gateway(request)
        return gateway + url.removeprefix(own) if gateway is not None and url.startswith(own) else url

    async def outbound_for(self, environment: EnvironmentDetail | None, request: gr.Request | None) -> OutboundSession:
        """The outbound session to reach this environment's live URLs (or, without one, a URL typed in) with:
        envhub's own gateway trusted, the rest through the guard, and the Hub token for a private Space's host."""
        credentials = await self.spaces.space_credentials(environment.id) if environment is not None else {}
        gateway = _own_gateway(request)
        return live_session(self.guard, *([gateway] if gateway else []), credentials=credentials)


def _own_gateway(request: gr.Request | None) -> str | None:
    """envhub's gateway on the address this server listens on, where it reaches its own endpoints."""
    connection = connection_of(request)
    return own_gateway(connection, "") if connection is not None else None
