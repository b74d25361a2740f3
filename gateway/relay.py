"""A WebSocket session relayed between a client and a replica as raw bytes.

Both legs are plain sockets (`Leg`): the client's is taken over from uvicorn once the
handshake is done (gateway.server), the replica's is opened here (`open_upstream`). Until a
replica has answered something, the client's bytes are also held, and the replica's first
message is read whole: a capacity refusal then goes no further, and the held bytes are
played to the next replica. After that every chunk is passed on as it arrives; only frame
headers are read. The relay pings a leg that has been quiet (a client that stopped
answering, a replica that hung) and closes the session when a ping goes unanswered; a
session in which neither side has sent a message for its idle time is closed (IDLE_CLOSE)
when another session waits for its slot.
"""

import asyncio
import json
import ssl
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import quote, urlsplit

import h11
from websockets.utils import accept_key, generate_key

from gateway.paths import PATH_SAFE
from gateway.traffic import Traffic
from gateway.wire import BINARY, CLOSE, PING, PONG, TEXT, Cutter, Head, close_frame, frame
from protocol.frames import capacity, rpc_capacity

_MAX_HEADERS = 64 * 1024
_HELD = 16 * 1024 * 1024  # bytes a client may send before a replica takes its session; then its reading waits
_WAITING_HELD = 64 * 1024  # the same while the session waits in the queue for a slot: a reset fits
# A capacity refusal is a short JSON text: a first message longer than this is no refusal and is passed on as it
# comes, and a replica that sends this much before any message is taken as having answered.
_REFUSAL_MAX = 64 * 1024
_BEFORE_FIRST_MAX = 1024 * 1024
CLOSE_TIMEOUT_S = 2.0  # how long a leg has to answer a close before its socket is shut
IDLE_CLOSE = 4000  # the close code of a session that was idle while another waited for its slot


class HandshakeError(Exception):
    """The replica did not accept the WebSocket (status is its HTTP status, when it answered one)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Leg(asyncio.Protocol):
    """One socket of a relayed session: where its incoming frames begin, when it was last heard, and its end."""

    def __init__(self, *, client_side: bool, on_lost: Callable[[Exception | None], None] | None = None) -> None:
        self.client_side = client_side  # the client's socket: what is written to it goes unmasked
        self.transport: asyncio.Transport | None = None
        self.cutter = Cutter()
        self.heard = time.monotonic()
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
        self.heard = time.monotonic()
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
            self._handshake.set_exception(HandshakeError("it closed the connection before answering"))
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
            raise HandshakeError(f"the handshake cannot be written as HTTP ({exc})") from None

    def feed(self, data: bytes) -> bytes | None:
        """The bytes after the answer's head once the server accepted; None while more is needed."""
        self._conn.receive_data(data)
        try:
            event = self._conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise HandshakeError(f"its handshake answer is not HTTP/1.1 ({exc})") from None
        if event is h11.NEED_DATA:
            return None
        status = getattr(event, "status_code", None)
        if not isinstance(event, h11.InformationalResponse) or status != 101:
            raise HandshakeError(f"it answered HTTP {status}", status if isinstance(status, int) else None)
        answered = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in event.headers}
        if answered.get("sec-websocket-accept") != accept_key(self.key):
            raise HandshakeError("its handshake answer does not match the key sent")
        if answered.get("sec-websocket-extensions"):
            raise HandshakeError("it answered with extensions that were not asked for")
        return self._conn.trailing_data[0]


async def open_upstream(url: str, path: str, query: str, headers: dict[str, str], timeout_s: float) -> Leg:
    """A WebSocket to a replica (`url` is its http(s) address), handshake done, as a Leg that keeps what it hears."""
    parts = urlsplit(url)
    secure = parts.scheme == "https"
    host = parts.hostname or "localhost"
    port = parts.port or (443 if secure else 80)
    if any(c <= " " or c == "\x7f" for c in query):
        raise HandshakeError("the query has spaces or control characters; percent-encode them")
    # The path arrives decoded: encoded again, a %0D or %20 in it never splits the request line.
    target = f"{parts.path.rstrip('/')}/{quote(path, safe=PATH_SAFE)}" + (f"?{query}" if query else "")
    loop = asyncio.get_running_loop()
    leg = Leg(client_side=False)
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


@dataclass
class Session:
    """One client session's relay, across the replicas it is tried on until one takes it."""

    endpoint_id: str
    client: Leg
    traffic: Traffic
    ping_s: float
    on_active: Callable[[], None] = lambda: None  # told once, when the client first asks for work
    # Idle this long (no message either way, none unanswered) while another session waits for the slot (`wanted`),
    # the session gives its slot up: 0 never does.
    idle_s: float = 0
    wanted: Callable[[], bool] = lambda: False
    active: bool = False  # the client sent a message (a reset, a step, an MCP call)
    confirmed: bool = False  # a replica answered something other than a refusal
    refused: dict[str, Any] | None = None  # the refusal's data (max_sessions ...), when the replica refused
    replica_lost: bool = False  # the replica died or hung: the pool should look at it
    _held: list[bytes] = field(default_factory=list)  # the client's bytes before a replica took the session
    _held_size: int = 0
    _first: "FirstReply" = field(default_factory=lambda: FirstReply())  # the replica's bytes until it has answered
    _upstream: Leg | None = None
    # The client's messages still unanswered, oldest first: whether each is a step, and when it was sent. The
    # protocol answers each message with one, in order, so every reply is paired with the oldest of them.
    _unanswered: deque[tuple[bool, float]] = field(default_factory=deque)
    _step_begun: bool = False  # the message the client is in the middle of sending is a step
    _reply_error: bool = False  # the message the replica is in the middle of sending is an error
    _closes: set[str] = field(default_factory=set)  # the sides that sent a close frame: "client", "replica"
    _refusing: asyncio.Future[None] | None = None
    _ticking: asyncio.TimerHandle | None = None
    _on_confirmed: Callable[[], None] = lambda: None
    _spoke: float = 0.0  # when the last message went either way (monotonic), since a replica took the session

    def __post_init__(self) -> None:
        self.client.listen(self._from_client)
        # Pinged from the start: while it waits for a slot envhub is the client's peer, and keeps it alive.
        self._ticking = asyncio.get_running_loop().call_later(self.ping_s / 2, self._tick)

    def end(self) -> None:
        """The session is over (relayed, refused or abandoned): no more pings."""
        if self._ticking is not None:
            self._ticking.cancel()

    async def run(self, upstream: Leg, lost: "asyncio.Future[str]", on_confirmed: Callable[[], None]) -> str:
        """Relay to this replica until the session ends ("ended") or the replica refuses it first ("refused")."""
        loop = asyncio.get_running_loop()
        self._refusing = loop.create_future()
        self._upstream, self.refused, self._first, self._on_confirmed = upstream, None, FirstReply(), on_confirmed
        self._spoke = time.monotonic()
        self.client.partner, upstream.partner = upstream, self.client
        self.client.resume_reading()
        for held in self._held:
            upstream.write(held)
        upstream.listen(self._from_upstream)
        self.traffic.session_opened()
        try:
            waited: list[asyncio.Future[Any]] = [self._refusing, lost, upstream.gone, self.client.gone]
            await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
            if self.refused is not None:
                upstream.listen(None)
                upstream.abort()
                self.client.partner = None
                return "refused"
            if lost.done() and not lost.cancelled():
                self._replica_gone(lost.result())
            await self._finish(upstream)
            return "ended"
        finally:
            self._upstream = None
            self.client.partner = None
            self.traffic.session_closed()

    async def _finish(self, upstream: Leg) -> None:
        """One leg has ended: end the other as it should be, then wait (a little) for both sockets to shut."""
        if upstream.closed and not self.client.closed:
            if "replica" not in self._closes:
                self._replica_gone(self._lost_reason("stopped answering"))
        elif self.client.closed and not upstream.closed and "client" not in self._closes:
            upstream.close(1000, "")  # the client vanished without a close
        both = asyncio.gather(upstream.gone, self.client.gone)
        try:
            await asyncio.wait_for(asyncio.shield(both), CLOSE_TIMEOUT_S)
        except TimeoutError:
            upstream.abort()
            self.client.abort()
            await both

    def _lost_reason(self, what: str) -> str:
        return f"endpoint {self.endpoint_id} lost this session: its replica {what}; start a new one"

    def _replica_gone(self, why: str) -> None:
        """The replica died or stopped answering: the client hears 1011 with the reason."""
        self.replica_lost = True
        self.client.close(1011, why)
        if self._upstream is not None:
            self._upstream.abort()

    # bytes as they arrive

    def _from_client(self, data: bytes, heads: list[Head]) -> None:
        closing = False
        upstream = self._upstream
        for head in heads:
            if head.opcode == CLOSE:
                self._closes.add("client")
                closing = "replica" in self._closes  # this answers the replica's close
            elif head.opcode == PING and upstream is None and head.start + head.length <= len(head.chunk):
                self.client.send_frame(PONG, head.payload(head.length))  # waiting: envhub is its peer
            elif not self.active and head.is_work():  # junk and queries do not make a session load
                self.active = True
                self.on_active()
            if head.opcode in (TEXT, BINARY):
                self._step_begun = head.is_step()
            if head.is_message_end:
                self._unanswered.append((self._step_begun, time.perf_counter()))
                self._spoke = time.monotonic()
        if not self.confirmed:
            self._held.append(data)
            self._held_size += len(data)
            if self._held_size > (_HELD if upstream is not None else _WAITING_HELD):
                self.client.pause_reading()
        if upstream is not None:
            upstream.write(data)
        if closing:
            self.client.close_now()

    def _from_upstream(self, data: bytes, heads: list[Head]) -> None:
        if not self.confirmed:
            first = self._first.feed(data, heads)
            if first is None:
                return
            refused = _refusal(first)
            if refused is not None:
                self.refused = refused
                if self._refusing is not None and not self._refusing.done():
                    self._refusing.set_result(None)
                return
            self.confirmed = True
            self._held.clear()
            self._held_size = 0
            self.client.resume_reading()
            self._on_confirmed()
            data = self._first.taken()
        closing = False
        for head in heads:
            if head.opcode == CLOSE:
                self._closes.add("replica")
                closing = "client" in self._closes  # the replica echoed the client's close
                continue
            if head.opcode in (TEXT, BINARY):
                self._reply_error = head.is_error()
            if head.is_message_end:
                self._spoke = time.monotonic()
                if self._unanswered:
                    step, sent = self._unanswered.popleft()
                    if step:
                        self.traffic.step(time.perf_counter() - sent, failed=self._reply_error)
        self.client.write(data)
        if closing:
            self.client.close_now()

    def _tick(self) -> None:
        """Ping a leg quiet for half an interval; one that leaves a ping unanswered for an interval is gone. An idle
        session gives its slot to one waiting for it."""
        now = time.monotonic()
        if self._idle(now) and self.wanted():
            self.client.close(
                IDLE_CLOSE,
                f"this session sent no message for {self.idle_s:g} s while another waited for its slot on endpoint "
                f"{self.endpoint_id}; connect again to start a new one",
            )
            if self._upstream is not None:
                self._upstream.close(1000, "")
            return
        for leg in (self.client, self._upstream):
            if leg is None or leg.closed:
                continue
            if not leg.keep_alive(self.ping_s, now):
                if leg is self.client:
                    leg.abort()  # it stopped answering: its replica hears a close
                else:
                    self._replica_gone(self._lost_reason("stopped answering pings"))
                return
        self._ticking = asyncio.get_running_loop().call_later(self.ping_s / 2, self._tick)

    def _idle(self, now: float) -> bool:
        """Whether a replica holds the session and no message has gone either way for idle_s, none unanswered.
        A trainer's socket is quiet while its model generates: only a wait for the slot makes that idleness cost."""
        held = self._upstream is not None and self.confirmed
        return bool(self.idle_s) and held and not self._unanswered and now - self._spoke >= self.idle_s


class FirstReply:
    """A replica's bytes until its first data message is known: whole when it is short enough to be a refusal.

    It reads the frame headers the replica's leg found, so each chunk is looked at once, and it holds at most
    `_BEFORE_FIRST_MAX` bytes of control frames and `_REFUSAL_MAX` of payload, whatever length a frame claims.
    """

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._size = 0
        self._payload: bytearray | None = None  # the first data frame's payload so far, once its header came
        self._left = 0  # of that payload, bytes still to come

    def feed(self, data: bytes, heads: list[Head]) -> bytes | None:
        """The first message's payload once it is whole; b"" when it cannot be a refusal; None: more is needed."""
        self._chunks.append(data)
        self._size += len(data)
        if self._payload is not None:
            return self._more(data)
        for head in heads:
            if head.opcode in (PING, PONG):
                continue
            if head.opcode not in (TEXT, BINARY) or not head.fin or head.mask:
                return b""  # a close, a fragment or a masked frame comes first: no refusal
            if head.length > _REFUSAL_MAX:
                return b""
            self._payload = bytearray(head.chunk[head.start : head.start + head.length])
            self._left = head.length - len(self._payload)
            return bytes(self._payload) if not self._left else None
        return b"" if self._size > _BEFORE_FIRST_MAX else None

    def _more(self, data: bytes) -> bytes | None:
        assert self._payload is not None
        piece = data[: self._left]
        self._payload += piece
        self._left -= len(piece)
        return bytes(self._payload) if not self._left else None

    def taken(self) -> bytes:
        """Every byte the replica sent so far, to pass on now that it has answered."""
        data, self._chunks, self._size = b"".join(self._chunks), [], 0
        return data


def _refusal(payload: bytes) -> dict[str, Any] | None:
    """The data of a capacity refusal (a CAPACITY_REACHED frame, or MCP's JSON-RPC error); else None."""
    if b"max_sessions" not in payload:
        return None
    try:
        parsed = json.loads(payload)
    except ValueError:
        return None
    return capacity(parsed) or rpc_capacity(parsed)
