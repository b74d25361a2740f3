"""A WebSocket session relayed between a client and a replica as raw bytes.

Both legs are plain sockets (gateway.legs): the client's is taken over from uvicorn once the
handshake is done (gateway.server), the replica's is opened by open_upstream. Until a
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
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.legs import CLOSE_TIMEOUT_S, Leg
from gateway.timers import LOOP_TIMERS, Cancellable, Timers
from gateway.traffic import Traffic
from gateway.wire import BINARY, CLOSE, PING, PONG, TEXT, Head
from protocol.frames import capacity, rpc_capacity

_HELD = 16 * 1024 * 1024  # bytes a client may send before a replica takes its session; then its reading waits
_WAITING_HELD = 64 * 1024  # the same while the session waits in the queue for a slot: a reset fits
# A capacity refusal is a short JSON text: a first message longer than this is no refusal and is passed on as it
# comes, and a replica that sends this much before any message is taken as having answered.
_REFUSAL_MAX = 64 * 1024
_BEFORE_FIRST_MAX = 1024 * 1024
IDLE_CLOSE = 4000  # the close code of a session that was idle while another waited for its slot


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
    timers: Timers = LOOP_TIMERS  # its pings' and its idleness's clock
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
    _ticking: Cancellable | None = None
    _on_confirmed: Callable[[], None] = lambda: None
    _spoke: float = 0.0  # when the last message went either way (monotonic), since a replica took the session

    def __post_init__(self) -> None:
        self.client.listen(self._from_client)
        # Pinged from the start: while it waits for a slot envhub is the client's peer, and keeps it alive.
        self._ticking = self.timers.later(self.ping_s / 2, self._tick)

    def end(self) -> None:
        """The session is over (relayed, refused or abandoned): no more pings."""
        if self._ticking is not None:
            self._ticking.cancel()

    async def run(self, upstream: Leg, lost: "asyncio.Future[str]", on_confirmed: Callable[[], None]) -> str:
        """Relay to this replica until the session ends ("ended") or the replica refuses it first ("refused")."""
        loop = asyncio.get_running_loop()
        self._refusing = loop.create_future()
        self._upstream, self.refused, self._first, self._on_confirmed = upstream, None, FirstReply(), on_confirmed
        self._spoke = self.timers.now()
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
                self._spoke = self.timers.now()
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
                self._spoke = self.timers.now()
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
        now = self.timers.now()
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
        self._ticking = self.timers.later(self.ping_s / 2, self._tick)

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
