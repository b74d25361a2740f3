"""envhub served on a loopback port for one command's run (`eval`, `statistics`): the run plays through envhub's own
gateway, as in the server, with its user's own network access (a model on a private address is allowed) and no web
page."""

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from app.settings import Settings

LOCAL = {"sync_interval_s": 0, "health_interval_s": 0, "allow_private_urls": True, "ui": False}


class NotServing(Exception):
    """The gateway could not be served on loopback."""


@dataclass(frozen=True)
class Loopback:
    services: Any  # app.services.Services, imported with the app only when a command runs
    url_of: Callable[[str], str]  # an endpoint id -> its gateway URL on this port


@asynccontextmanager
async def served(settings: Settings) -> AsyncIterator[Loopback]:
    """envhub's app on a free loopback port while the block runs; NotServing when it cannot start."""
    from app.main import create_app
    from app.server import envhub_server
    from gateway.paths import gateway_path

    app = create_app(settings.model_copy(update=LOCAL))
    server = envhub_server(app, host="127.0.0.1", port=0, log_level="warning")
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            raise NotServing("envhub: could not serve the gateway on loopback")
        await asyncio.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Loopback(app.state.services, lambda endpoint_id: f"http://127.0.0.1:{port}{gateway_path(endpoint_id)}")
    finally:
        server.should_exit = True
        await serving
