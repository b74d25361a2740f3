"""envhub's uvicorn server: the gateway's protocols (gateway.server), the settings they run with, and a shutdown that
lets the runs under way end as interrupted before the sockets they play through close."""

import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn
from fastapi import FastAPI

from app.settings import Settings
from evals.runs import Runner
from gateway.server import GatewayHttpProtocol, GatewayWebSocketProtocol

__all__ = ["EnvhubServer", "envhub_server", "server_config"]


GRACEFUL_SHUTDOWN_S = 10.0


def server_config(app: FastAPI, ws_ping_s: float, **options: Any) -> uvicorn.Config:
    """uvicorn's config for the envhub app. Other WebSockets get uvicorn's pings at the gateway's interval. No
    compression: the gateway passes a replica's frames on as they are, so the client's must be plain too. A
    shutdown waits a while for the requests under way, then cancels them: an open page's event stream never ends
    by itself, and would keep envhub from stopping for as long as the tab stays open."""
    options.setdefault("timeout_graceful_shutdown", GRACEFUL_SHUTDOWN_S)
    return uvicorn.Config(
        app,
        http=GatewayHttpProtocol,
        ws=GatewayWebSocketProtocol,
        ws_per_message_deflate=False,
        ws_ping_interval=ws_ping_s,
        ws_ping_timeout=ws_ping_s,
        **options,
    )


class EnvhubServer(uvicorn.Server):
    """uvicorn's server, which stops envhub's evaluations before it closes its connections. An evaluation plays
    through envhub's own gateway, whose sockets a shutdown closes (1012) before the app's lifespan ends: stopped
    first, the run ends interrupted with its finished episodes, instead of failing on its own gateway's close."""

    def __init__(self, config: uvicorn.Config, runner: Runner) -> None:
        super().__init__(config)
        self.runner = runner

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's, but a stop asked for by SIGINT or SIGTERM is envhub's normal end: uvicorn would raise the
        signal again once stopped, and Ctrl-C would end in a KeyboardInterrupt's traceback and a failing status."""
        with super().capture_signals():
            try:
                yield
            finally:
                self._captured_signals.clear()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await self.runner.stop()
        await super().shutdown(sockets)


def envhub_server(app: FastAPI, **options: Any) -> EnvhubServer:
    """envhub's server for the envhub app (server_config's options), with the settings and runner app.main built."""
    settings: Settings = app.state.services.settings
    runner: Runner = app.state.services.runner
    # The scheme and the client's address come from X-Forwarded-* only when a proxy that sets them stands in
    # front: the Hub's on a Space (any peer: it is the only way in), else whom uvicorn trusts (127.0.0.1, or
    # FORWARDED_ALLOW_IPS). Trusted from anyone, a client would name a new address a request and take a fresh
    # share of every per-client limit.
    options.setdefault("proxy_headers", True)
    if settings.space_id is not None:
        options.setdefault("forwarded_allow_ips", "*")
    return EnvhubServer(server_config(app, settings.ws_ping_s, **options), runner)
