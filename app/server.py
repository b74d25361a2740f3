"""envhub's uvicorn server, which hands the gateway's WebSocket sessions straight to the relay.

Through the ASGI app, a WebSocket session costs the gateway about as much CPU to open as it
costs the replica to serve, and uvicorn parses every frame into a message and back. So the
server takes a WebSocket upgrade for `/endpoints/<id>/...` itself: it completes the
handshake and gives the socket to the gateway as a `Leg` (app.relay), through which bytes
pass untouched. Every other request and WebSocket goes to the app, as with uvicorn's own
protocol.
"""

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import unquote

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.utils import get_remote_addr
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request

from app import gateway
from app.relay import CLOSE_TIMEOUT_S, Leg
from app.services import Services

# A gateway session: (the services, the request's path, its query, the client's socket, its handshake's headers,
# its address) -> relayed until it ends.
Relay = Callable[[Services, str, str, Leg, Mapping[str, str], str], Awaitable[None]]


class HeadDeadlineProtocol(HttpToolsProtocol):
    """uvicorn's HTTP protocol, with a deadline on each request's head (a WebSocket handshake's too): a connection
    that stays silent, or trickles its headers, is answered 408 and closed rather than held open for good."""

    head_timeout_s: float = 10
    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_deadline is None:
            self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._head_deadline = self.loop.call_later(self.head_timeout_s, self._head_too_slow)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if self.transport.is_closing():
            return
        body = f"the request's head did not arrive within {self.head_timeout_s:g} s; send it whole at once\n".encode()
        self.transport.write(
            b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        self.transport.close()


class GatewayWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, except that gateway sessions skip the app and go to `relay` as raw sockets."""

    services: Services
    relay: Relay
    claims: Callable[[str], bool]

    taken: Leg | None = None

    def handle_connect(self, event: Request) -> None:
        raw_path, _, query = event.path.partition("?")
        path = unquote(raw_path)
        if not self.claims(path):
            super().handle_connect(event)
            return
        self.request = event
        self.response = self.conn.accept(event)
        self.handshake_initiated = self.handshake_complete = True
        self.conn.send_response(self.response)
        self.transport.write(b"".join(self.conn.data_to_send()))
        if self.response.status_code != 101:  # not a valid WebSocket handshake: the answer says why
            self.close_sent = True
            self.transport.close()
            return
        leg = Leg(client_side=True, on_lost=self._lost)
        leg.connection_made(self.transport)
        self.taken = leg  # uvicorn makes this protocol the socket's once this call returns: it passes bytes on
        address = get_remote_addr(self.transport)
        task = self.loop.create_task(self._relay(path, query, leg, event.headers, address[0] if address else ""))
        task.add_done_callback(self.on_task_complete)
        self.tasks.add(task)

    async def _relay(self, path: str, query: str, leg: Leg, headers: Mapping[str, str], peer: str) -> None:
        self.transport.set_protocol(leg)  # from now on the socket's bytes go to the leg alone
        try:
            await self.relay(self.services, path, query, leg, headers, peer)
        except Exception:
            self.logger.exception("Exception in the gateway's relay of %s", path)
            leg.close(1011, "envhub failed while relaying this session; start a new one")
        finally:
            leg.close_now()

    def data_received(self, data: bytes) -> None:
        if self.taken is not None:
            self.taken.data_received(data)
        else:
            super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.taken is not None:
            self.taken.connection_lost(exc)
        else:
            super().connection_lost(exc)

    def _lost(self, exc: Exception | None) -> None:
        WebSocketsSansIOProtocol.connection_lost(self, exc)  # uvicorn forgets the connection

    def shutdown(self) -> None:
        if self.taken is not None:
            self.taken.close(1012, "envhub is restarting; open a new session")
            self.loop.call_later(CLOSE_TIMEOUT_S, self.taken.abort)  # a client that reads nothing holds no shutdown
            return
        super().shutdown()


def server_config(app: FastAPI, **options: Any) -> uvicorn.Config:
    """uvicorn's config for the envhub app. Other WebSockets get uvicorn's pings at the gateway's interval. No
    compression: the gateway passes a replica's frames on as they are, so the client's must be plain too."""
    services: Services = app.state.services
    protocol = type(
        "EnvhubWebSocketProtocol",
        (GatewayWebSocketProtocol,),
        {
            "services": services,
            "relay": staticmethod(gateway.relay_websocket),
            "claims": staticmethod(gateway.is_session_path),
        },
    )
    http = type("EnvhubHttpProtocol", (HeadDeadlineProtocol,), {"head_timeout_s": services.settings.header_timeout_s})
    return uvicorn.Config(
        app,
        http=http,
        ws=protocol,
        ws_per_message_deflate=False,
        ws_ping_interval=services.settings.ws_ping_s,
        ws_ping_timeout=services.settings.ws_ping_s,
        **options,
    )
