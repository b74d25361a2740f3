"""envhub's uvicorn protocols: gateway WebSocket sessions go straight to the relay, requests to an endpoint's /mcp
straight to the MCP door's app (its calls answered in one write, counted as traffic rather than logged line by
line), and every request's head has a deadline.

Through the ASGI app, a WebSocket session costs the gateway about as much CPU to open as it
costs the replica to serve, and uvicorn parses every frame into a message and back. So the
server takes a WebSocket upgrade for `/endpoints/<id>/...` itself: it completes the
handshake and gives the socket to the gateway as a `Leg` (gateway.relay), through which bytes
pass untouched. Every other request and WebSocket goes to the app, as with uvicorn's own
protocol. They subclass uvicorn's private protocol classes, and the door's answers swap their
request cycle's transport: tests/test_server_fence.py fails when an upgrade changes what they
override or swap.
"""

import asyncio
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.protocols.utils import get_remote_addr
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request

from gateway.paths import is_session_path, session_path
from gateway.ports import Gateway
from gateway.relay import CLOSE_TIMEOUT_S, Leg
from gateway.sessions import serve_session

__all__ = ["GatewayHttpProtocol", "GatewayWebSocketProtocol", "HeadDeadlineProtocol", "OneWrite"]


class HeadDeadlineProtocol(HttpToolsProtocol):
    """uvicorn's HTTP protocol, with a deadline on each request's head (a WebSocket handshake's too): a connection
    that stays silent, or trickles its headers, is answered 408 and closed rather than held open for good.

    One timer a connection watches the heads: a request notes when its head began and when it was whole, which
    costs a request nothing more (a timer armed and cancelled per request cost the MCP door's calls 4 % of envhub's
    CPU). When the timer fires it looks: a head under way past the deadline is answered; otherwise it waits again,
    until the deadline of the head under way or for a whole interval."""

    head_timeout_s = 10.0
    _head_since: float | None = None  # when the head under way began, on the loop's clock; None between heads
    _watch: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        gateway = self.app_state.get("gateway")
        self.head_timeout_s = gateway.settings.header_timeout_s if isinstance(gateway, Gateway) else 10.0
        self._head_since = self.loop.time()
        self._watch_for(self.head_timeout_s)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_since is None:
            self._head_since = self.loop.time()

    def on_headers_complete(self) -> None:
        self._head_since = None
        super().on_headers_complete()

    def handle_websocket_upgrade(self) -> None:
        self._stop_watching()  # the socket is a WebSocket's from now on: this protocol is done with it
        super().handle_websocket_upgrade()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_watching()
        super().connection_lost(exc)

    def _stop_watching(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def _watch_for(self, delay_s: float) -> None:
        self._watch = self.loop.call_later(delay_s, self._look)

    def _look(self) -> None:
        self._watch = None
        if self.transport.is_closing():
            return
        if self._head_since is None:
            self._watch_for(self.head_timeout_s)
            return
        left_s = self._head_since + self.head_timeout_s - self.loop.time()
        if left_s > 0:
            self._watch_for(left_s)
            return
        body = f"the request's head did not arrive within {self.head_timeout_s:g} s; send it whole at once\n".encode()
        self.transport.write(
            b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        self.transport.close()


class GatewayHttpProtocol(HeadDeadlineProtocol):
    """envhub's HTTP protocol: HeadDeadlineProtocol's, and requests to an endpoint's `/mcp` handed straight to the
    app the lifespan state names `"mcp"` (app.agents.McpApp), past the app's middleware and routing.

    The MCP door's calls (POSTs) are then answered as data-plane traffic: the answer leaves in one write, its head
    with its body, where uvicorn writes them apart, so the client wakes once, not twice; and it writes no access
    line, as the frames the gateway relays write none (the endpoint's traffic figures count its calls). These took
    a tool call's time through the door from 1.27 to about 1.2 times the server's own (bench/RESULTS.md)."""

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        found = session_path(cycle.scope["path"])
        mcp = self.app_state.get("mcp")
        if found is not None and found[1] == "mcp" and mcp is not None and app is self.app:
            app = mcp
            # (a 100 Continue must leave at once: it is what the client waits for before sending its body)
            if cycle.scope["method"] == "POST" and not cycle.waiting_for_100_continue:
                cycle.access_log = False
                cycle.transport = OneWrite(self.transport)  # type: ignore[assignment]
        super()._start_asgi_task(cycle, app)


class OneWrite:
    """A transport whose first write (an answer's head) waits for the next (its body, or a stream's first chunk),
    and leaves with it."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.head: bytes | None = None
        self.first = True

    def write(self, data: bytes) -> None:
        if self.first:
            self.first, self.head = False, data
            return
        if self.head is not None:
            data, self.head = self.head + data, None
        self.transport.write(data)

    def __getattr__(self, name: str) -> Any:  # everything else is the transport's own
        return getattr(self.transport, name)


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
