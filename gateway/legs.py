"""A WebSocket's two legs as plain sockets: the client's, taken over from uvicorn once its handshake is done
(gateway.server), and the replica's, opened here (`open_upstream`) with a handshake of envhub's own."""

import asyncio
import ssl
import time
from collections.abc import Callable
from typing import cast
from urllib.parse import quote, urlsplit

import h11
from websockets.utils import accept_key, generate_key

from gateway.paths import PATH_SAFE
from gateway.wire import PING, Cutter, Head, close_frame, frame

_MAX_HEADERS = 64 * 1024
CLOSE_TIMEOUT_S = 2.0  # how long a leg has to answer a close before its socket is shut


class HandshakeError(Exception):
    """The replica did not accept the WebSocket: the code says which way (closed, unwritable, not_http, refused with
    its HTTP status, wrong_accept, extensions, query), for the relay to tell apart."""

    def __init__(self, message: str, code: str, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


class Leg(asyncio.Protocol):
    """One socket of a relayed session: where its incoming frames begin, when it was last heard, and its end."""

    def __init__(
        self,
        *,
        client_side: bool,
        on_lost: Callable[[Exception | None], None] | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client_side = client_side  # the client's socket: what is written to it goes unmasked
        self.transport: asyncio.Transport | None = None
        self.cutter = Cutter()
        self._now = now  # the clock its pings are timed by (gateway.timers)
        self.heard = now()
        self.pinged: float | None = None  # when an unanswered ping went out
        self.gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.partner: Leg | None = None  # the leg whose writes this one's reading keeps pace with
        self._backlog: list[tuple[bytes, list[Head]]] = []
        self._on_bytes: Callable[[bytes, list[Head]], None] | None = None
        self._on_lost = on_lost
        self._handshake: asyncio.Future[None] | None = None
        self._upgrade: Upgrade | None = None
        self._paused = False
        self._shut = False  # this side said close and shut its writing: what comes in is dropped

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport's subclasses

    def data_received(self, data: bytes) -> None:
        if self._handshake is not None:
            self._read_handshake(data)
            return
        if self._shut:
            return
        self.heard = self._now()
        self.pinged = None
        heads = self.cutter.feed(data)
        if self._on_bytes is None:
            self._backlog.append((data, heads))
        else:
            self._on_bytes(data, heads)

    def eof_received(self) -> bool:
        return False  # the socket closes

    def connection_lost(self, exc: Exception | None) -> None:
        if self._handshake is not None and not self._handshake.done():
            self._handshake.set_exception(HandshakeError("it closed the connection before answering", "closed"))
        if not self.gone.done():
            self.gone.set_result(None)
        if self._on_lost is not None:
            self._on_lost(exc)

    def pause_writing(self) -> None:
        if self.partner is not None:
            self.partner.pause_reading()

    def resume_writing(self) -> None:
        if self.partner is not None:
            self.partner.resume_reading()

    # the relay's side

    def listen(self, on_bytes: Callable[[bytes, list[Head]], None] | None) -> None:
        """Where incoming bytes go from now on (None: keep them until someone listens); kept ones go first."""
        self._on_bytes = on_bytes
        while on_bytes is not None and self._backlog:
            on_bytes(*self._backlog.pop(0))

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing() and not self._shut:
            self.transport.write(data)

    def send_frame(self, opcode: int, payload: bytes = b"") -> bool:
        """Write a frame of the relay's own, unless the bytes passed on so far stop inside a frame."""
        writer = self.partner
        if writer is not None and not writer.cutter.at_boundary:
            return False
        self.write(frame(opcode, payload, masked=not self.client_side))
        return True

    def keep_alive(self, ping_s: float, now: float) -> bool:
        """Ping the peer once it has been quiet for half an interval; False once a ping has gone unanswered for a
        whole one (the peer is gone). Called every half interval by whoever holds the leg."""
        if self.pinged is not None and now - self.pinged >= ping_s:
            return False
        if self.pinged is None and now - self.heard >= ping_s / 2 and self.send_frame(PING, b"envhub"):
            self.pinged = now
        return True

    def close(self, code: int, reason: str) -> None:
        """Say close (when a frame fits here), then shut this side of the socket once that is written; the socket
        closes when the peer shuts its side, or after CLOSE_TIMEOUT_S. Meanwhile what the peer sends is read and
        dropped: a socket closed under a peer still sending (a pong, its close reply) resets the connection, and
        a client whose close reply meets a reset may lose the frames it had just read (websockets' does)."""
        transport = self.transport
        if transport is None or transport.is_closing() or self._shut:
            return
        writer = self.partner
        if writer is None or writer.cutter.at_boundary:
            self.write(close_frame(code, reason, masked=not self.client_side))
        self._shut = True
        if not transport.can_write_eof():  # TLS: no half-close
            transport.close()
            return
        transport.write_eof()
        asyncio.get_running_loop().call_later(CLOSE_TIMEOUT_S, transport.close)

    def close_now(self) -> None:
        """Shut the socket once what is written has gone (the close handshake is over); one that said close itself
        is shut as `close` arranged, when its peer has shut its side."""
        if self.transport is not None and not self._shut:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def pause_reading(self) -> None:
        if self.transport is not None and not self._paused and not self.transport.is_closing():
            self._paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and self._paused and not self.transport.is_closing():
            self._paused = False
            self.transport.resume_reading()

    @property
    def closed(self) -> bool:
        return self.gone.done()

    # the upstream handshake

    def _read_handshake(self, data: bytes) -> None:
        assert self._handshake is not None and self._upgrade is not None
        try:
            rest = self._upgrade.feed(data)
        except HandshakeError as exc:
            self._handshake.set_exception(exc)
            self._handshake = None
            return
        if rest is None:
            return
        done, self._handshake, self._upgrade = self._handshake, None, None
        done.set_result(None)
        if rest:
            self.data_received(rest)


class Upgrade:
    """A WebSocket upgrade's client side, spoken with h11: the request it writes, and the answer it reads to its head.

    h11 refuses a header or target that would split the request, and reads the answer as HTTP/1.1 says; the key and
    the accept it must come back with are websockets' own."""

    def __init__(self, target: str, authority: str, headers: dict[str, str]) -> None:
        self.key = generate_key()
        self._conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEADERS)
        asked = [("Host", authority), ("Upgrade", "websocket"), ("Connection", "Upgrade")]
        asked += [("Sec-WebSocket-Key", self.key), ("Sec-WebSocket-Version", "13"), *headers.items()]
        try:
            self.request = self._conn.send(h11.Request(method="GET", target=target, headers=asked))
            self.request += self._conn.send(h11.EndOfMessage())
        except h11.LocalProtocolError as exc:
            raise HandshakeError(f"the handshake cannot be written as HTTP ({exc})", "unwritable") from None

    def feed(self, data: bytes) -> bytes | None:
        """The bytes after the answer's head once the server accepted; None while more is needed."""
        self._conn.receive_data(data)
        try:
            event = self._conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise HandshakeError(f"its handshake answer is not HTTP/1.1 ({exc})", "not_http") from None
        if event is h11.NEED_DATA:
            return None
        status = getattr(event, "status_code", None)
        if not isinstance(event, h11.InformationalResponse) or status != 101:
            raise HandshakeError(f"it answered HTTP {status}", "refused", status if isinstance(status, int) else None)
        answered = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in event.headers}
        if answered.get("sec-websocket-accept") != accept_key(self.key):
            raise HandshakeError("its handshake answer does not match the key sent", "wrong_accept")
        if answered.get("sec-websocket-extensions"):
            raise HandshakeError("it answered with extensions that were not asked for", "extensions")
        return self._conn.trailing_data[0]


async def open_upstream(
    url: str,
    path: str,
    query: str,
    headers: dict[str, str],
    timeout_s: float,
    now: Callable[[], float] = time.monotonic,
) -> Leg:
    """A WebSocket to a replica (`url` is its http(s) address), handshake done, as a Leg that keeps what it hears."""
    parts = urlsplit(url)
    secure = parts.scheme == "https"
    host = parts.hostname or "localhost"
    port = parts.port or (443 if secure else 80)
    if any(c <= " " or c == "\x7f" for c in query):
        raise HandshakeError("the query has spaces or control characters; percent-encode them", "query")
    # The path arrives decoded: encoded again, a %0D or %20 in it never splits the request line.
    target = f"{parts.path.rstrip('/')}/{quote(path, safe=PATH_SAFE)}" + (f"?{query}" if query else "")
    loop = asyncio.get_running_loop()
    leg = Leg(client_side=False, now=now)
    leg._upgrade = Upgrade(target, parts.netloc.rpartition("@")[2], headers)
    leg._handshake = loop.create_future()
    context = ssl.create_default_context() if secure else None

    async def connect() -> None:
        await loop.create_connection(lambda: leg, host, port, ssl=context, server_hostname=host if secure else None)
        assert leg._handshake is not None and leg._upgrade is not None
        leg.write(leg._upgrade.request)
        await leg._handshake

    try:
        await asyncio.wait_for(connect(), timeout_s)
    except BaseException:
        leg.abort()
        raise
    return leg
