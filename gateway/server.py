"""envhub's uvicorn protocols: gateway WebSocket sessions go straight to the relay, and every request's head has a
deadline.

Through the ASGI app, a WebSocket session costs the gateway about as much CPU to open as it
costs the replica to serve, and uvicorn parses every frame into a message and back. So the
server takes a WebSocket upgrade for `/endpoints/<id>/...` itself: it completes the
handshake and gives the socket to the gateway as a `Leg` (gateway.relay), through which bytes
pass untouched. Every other request and WebSocket goes to the app, as with uvicorn's own
protocol. Both subclass uvicorn's private protocol classes: tests/test_server_fence.py fails when
an upgrade changes what they override.
"""

import asyncio
from collections.abc import Mapping
from urllib.parse import unquote

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.utils import get_remote_addr
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request

from gateway.paths import is_session_path
from gateway.ports import Gateway
from gateway.relay import CLOSE_TIMEOUT_S, Leg
from gateway.sessions import serve_session

__all__ = ["GatewayWebSocketProtocol", "HeadDeadlineProtocol"]


class HeadDeadlineProtocol(HttpToolsProtocol):
    """uvicorn's HTTP protocol, with a deadline on each request's head (a WebSocket handshake's too): a connection
    that stays silent, or trickles its headers, is answered 408 and closed rather than held open for good."""

    _head_deadline: asyncio.TimerHandle | None = None

    @property
    def head_timeout_s(self) -> float:
        gateway = self.app_state.get("gateway")
        return gateway.settings.header_timeout_s if isinstance(gateway, Gateway) else 10.0

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
    """uvicorn's WebSocket protocol, except that gateway sessions skip the app and go to the relay as raw sockets.

    The data plane (`Gateway`) comes from the app's lifespan state, as `{"gateway": ...}`."""

    taken: Leg | None = None

    def handle_connect(self, event: Request) -> None:
        raw_path, _, query = event.path.partition("?")
        path = unquote(raw_path)
        gateway = self.app_state.get("gateway")
        if not isinstance(gateway, Gateway) or not is_session_path(path):
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
        peer = address[0] if address else ""
        task = self.loop.create_task(self._relay(gateway, path, query, leg, event.headers, peer))
        task.add_done_callback(self.on_task_complete)
        self.tasks.add(task)

    async def _relay(
        self, gateway: Gateway, path: str, query: str, leg: Leg, headers: Mapping[str, str], peer: str
    ) -> None:
        self.transport.set_protocol(leg)  # from now on the socket's bytes go to the leg alone
        try:
            await serve_session(gateway, path, query, leg, headers, peer)
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
