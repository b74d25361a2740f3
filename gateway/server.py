"""envhub's uvicorn protocols: gateway WebSocket sessions go straight to the relay, requests to an endpoint's /mcp
straight to the MCP door's app (its calls answered in one write, counted as traffic rather than logged line by
line), and every request's head has a deadline and a size, its body a deadline.

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
from typing import Any, cast
from urllib.parse import unquote

from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.protocols.utils import get_remote_addr
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request

from gateway.legs import CLOSE_TIMEOUT_S, Leg
from gateway.paths import is_session_path, session_path
from gateway.socket_sessions import serve_session
from gateway.wiring import Gateway

__all__ = ["GatewayHttpProtocol", "GatewayWebSocketProtocol", "HeadDeadlineProtocol", "OneWrite"]


class HeadDeadlineProtocol(HttpToolsProtocol):
    """uvicorn's HTTP protocol, with bounds on each request's head (a WebSocket handshake's too) and body: a head
    must arrive within a deadline and a size, a body within its own deadline. A connection that stays silent,
    trickles its headers or its body is answered 408, one whose head grows past the size 431, and closed rather
    than held open for good.

    The head's bytes are counted as they arrive, before httptools reads them: it joins a long header's pieces by
    concatenation, which a header without end would turn into minutes of the event loop.

    One timer a connection watches the deadlines: a request notes when its head began, when it was whole and when
    its body was, which costs a request nothing more (a timer armed and cancelled per request cost the MCP door's
    calls 4 % of envhub's CPU). When the timer fires it looks: a head or body under way past its deadline is
    answered; otherwise it waits again, until the deadline of the one under way or for a whole interval."""

    head_timeout_s = 10.0
    body_timeout_s = 30.0
    max_head_bytes = 64 * 1024
    _head_since: float | None = None  # when the head under way began, on the loop's clock; None between heads
    _head_room = 0  # bytes the head under way may still take
    _body_since: float | None = None  # when the body under way began (its head was whole); None when none is
    _watch: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        gateway = self.app_state.get("gateway")
        if isinstance(gateway, Gateway):
            settings = gateway.settings
            self.head_timeout_s, self.body_timeout_s = settings.header_timeout_s, settings.body_timeout_s
            self.max_head_bytes = settings.max_head_bytes
        self._head_since, self._head_room = self.loop.time(), self.max_head_bytes
        self._watch_for(min(self.head_timeout_s, self.body_timeout_s))

    def data_received(self, data: bytes) -> None:
        if self._head_since is None or len(data) <= self._head_room:
            if self._head_since is not None:
                self._head_room -= len(data)
            super().data_received(data)
            return
        # The head would pass its size in these bytes, unless it ends within what is left of it: httptools reads
        # only that much, and the rest once the head has ended.
        room, self._head_room = self._head_room, 0
        super().data_received(data[:room])
        if self.transport.is_closing():
            return
        if not self._head_room:  # no head ended (on_headers_complete gives the next one its room)
            kib = self.max_head_bytes // 1024
            self._refuse(
                "431 Request Header Fields Too Large",
                f"the request's head (its line and headers) is over {kib} KiB, the most envhub reads; send less",
            )
            return
        reader = cast(asyncio.Protocol, self.transport.get_protocol())  # a WebSocket's, when the head upgraded it
        reader.data_received(data[room:])

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_since is None:
            self._head_since = self.loop.time()

    def on_headers_complete(self) -> None:
        self._head_since, self._head_room, self._body_since = None, self.max_head_bytes, self.loop.time()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._body_since = None
        super().on_message_complete()

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
        if self._head_since is not None:
            left_s = self._head_since + self.head_timeout_s - self.loop.time()
            if left_s <= 0:
                why = f"the request's head did not arrive within {self.head_timeout_s:g} s; send it whole at once"
                self._refuse("408 Request Timeout", why)
                return
        elif self._body_since is not None:
            left_s = self._body_since + self.body_timeout_s - self.loop.time()
            if left_s <= 0:
                if self.cycle is not None and self.cycle.response_started:  # answered already: no second answer
                    self.transport.close()
                    return
                why = f"the request's body did not arrive within {self.body_timeout_s:g} s; send it at once"
                self._refuse("408 Request Timeout", why)
                return
        else:
            left_s = min(self.head_timeout_s, self.body_timeout_s)
        self._watch_for(left_s)

    def _refuse(self, status: str, why: str) -> None:
        """Answer with the status and why, and close: what the client sent is not read any further."""
        body = f"{why}\n".encode()
        self.transport.write(
            f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n".encode()
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        self.transport.close()


class GatewayHttpProtocol(HeadDeadlineProtocol):
    """envhub's HTTP protocol: HeadDeadlineProtocol's, and requests to the doors handed straight to their apps, past
    the app's middleware and routing: an endpoint's `/mcp` to the app the lifespan state names `"mcp"`
    (app.mcp_door.McpApp), `/model/...` to the one it names `"model"` (gateway.modeldoor.ModelDoor).

    The doors' calls (POSTs) are then answered as data-plane traffic: the answer leaves in one write, its head
    with its body, where uvicorn writes them apart, so the client wakes once, not twice; and it writes no access
    line, as the frames the gateway relays write none (the endpoint's traffic figures count its MCP calls, an agent
    run's record its model calls). These took a tool call's time through the door from 1.27 to about 1.2 times the
    server's own (bench/RESULTS.md)."""

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        door = self._door_of(cycle.scope["path"]) if app is self.app else None
        if door is not None:
            app = door
            # (a 100 Continue must leave at once: it is what the client waits for before sending its body)
            if cycle.scope["method"] == "POST" and not cycle.waiting_for_100_continue:
                cycle.access_log = False
                cycle.transport = OneWrite(self.transport)  # type: ignore[assignment]
        super()._start_asgi_task(cycle, app)

    def _door_of(self, path: str) -> ASGI3Application | None:
        found = session_path(path)
        if found is not None and found[1] == "mcp":
            return cast(ASGI3Application | None, self.app_state.get("mcp"))
        if path == "/model" or path.startswith("/model/"):
            return cast(ASGI3Application | None, self.app_state.get("model"))
        return None


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
        leg = Leg(client_side=True, on_lost=self._lost, now=gateway.timers.now)
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
