"""envhub's uvicorn server config: the gateway's protocols (gateway.server), and the settings they run with."""

from typing import Any

import uvicorn
from fastapi import FastAPI

from app.services import Services
from gateway.server import GatewayWebSocketProtocol, HeadDeadlineProtocol

__all__ = ["server_config"]


def server_config(app: FastAPI, **options: Any) -> uvicorn.Config:
    """uvicorn's config for the envhub app. Other WebSockets get uvicorn's pings at the gateway's interval. No
    compression: the gateway passes a replica's frames on as they are, so the client's must be plain too."""
    services: Services = app.state.services
    return uvicorn.Config(
        app,
        http=HeadDeadlineProtocol,
        ws=GatewayWebSocketProtocol,
        ws_per_message_deflate=False,
        ws_ping_interval=services.settings.ws_ping_s,
        ws_ping_timeout=services.settings.ws_ping_s,
        **options,
    )
