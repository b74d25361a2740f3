"""The door's socket to a replica's `/ws`: whole text messages, sent and received, over the relay's plain socket.

The relay's `Leg` already opens the socket (its handshake read with h11, TLS for a Space) and finds where frames
begin; this reads their payloads into messages. It answers the replica's pings, pings a replica that has been
quiet for half an interval and gives it up when a ping goes unanswered for one. It refuses a message over
`max_size` by its frame headers, before holding its bytes, and more than that of messages nobody has read yet.
A call through the door is one message each way: websockets' asyncio connection around the same frames cost
envhub 18 % of its CPU on a call (bench/RESULTS.md).
"""

import asyncio
import struct
import time
from collections import deque

from gateway.legs import Leg, open_upstream
from gateway.wire import BINARY, CLOSE, CONTINUATION, PING, PONG, TEXT, Head, frame

__all__ = ["Upstream", "UpstreamClosed", "connect_upstream"]


class UpstreamClosed(Exception):
    """The replica's socket is closed: its close code and reason (1006 when it vanished without one)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"{code} {reason}".strip())
        self.code, self.reason = code, reason


class Upstream:
    """Text messages over a replica's socket, as the door's session speaks to it."""

    def __init__(self, leg: Leg, *, ping_s: float, max_size: int) -> None:
        self.leg, self.ping_s, self.max_size = leg, ping_s, max_size
        self.closed: UpstreamClosed | None = None
        self._messages: deque[tuple[str, int]] = deque()  # messages not read yet, each with its size in bytes
        self._unread = 0  # their sizes together
        self._waiter: asyncio.Future[None] | None = None
        self._frame: Head | None = None  # the frame whose payload is still arriving
        self._frame_parts: list[bytes] = []
        self._frame_left = 0
        self._message: list[bytes] = []  # the payloads of the message under way (its first frame's opcode aside)
        self._message_opcode: int | None = None
        self._message_size = 0
        loop = asyncio.get_running_loop()
        self._ticking = loop.call_later(ping_s / 2, self._tick)
        leg.gone.add_done_callback(lambda _: self._end(UpstreamClosed(1006, "the replica's socket closed")))
        leg.listen(self._on_bytes)

    async def send(self, text: str) -> None:
        if self.closed is not None:
            raise self.closed
        self.leg.write(frame(TEXT, text.encode(), masked=True))

    async def recv(self) -> str:
        while not self._messages:
            if self.closed is not None:
                raise self.closed
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        text, size = self._messages.popleft()
        self._unread -= size
        return text

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Say close and wait for the socket to shut (the replica's close answer, or the relay's timeout)."""
        if self.closed is None:
            self.leg.close(code, reason)
            self._end(UpstreamClosed(code, reason))
        await asyncio.shield(self.leg.gone)

    # reading

    def _on_bytes(self, data: bytes, heads: list[Head]) -> None:
        if self._frame_left:  # the payload of a frame begun in an earlier chunk
            taken = min(self._frame_left, len(data))
            self._frame_parts.append(data[:taken])
            self._frame_left -= taken
            if not self._frame_left:
                self._frame_done()
        for head in heads:
            refused = self._refusal(head)
            if refused is not None:
                self._fail(*refused)
                return
            self._frame = head
            came = head.chunk[head.start : head.start + head.length]
            self._frame_parts = [came]
            self._frame_left = head.length - len(came)
            if not self._frame_left:
                self._frame_done()
            if self.closed is not None:
                return

    def _refusal(self, head: Head) -> tuple[int, str] | None:
        """Why a frame is refused by its header alone, before its payload is held: a close code and reason."""
        if head.mask:
            return 1002, "a server's frames are not masked"
        if head.opcode >= CLOSE and (head.length > 125 or not head.fin):
            return 1002, "a control frame over 125 bytes or in fragments"
        if head.opcode in (TEXT, BINARY, CONTINUATION) and self._message_size + head.length > self.max_size:
            return 1009, f"a message over {self.max_size:,} bytes"
        return None

    def _frame_done(self) -> None:
        head, payload = self._frame, b"".join(self._frame_parts)
        assert head is not None
        self._frame, self._frame_parts = None, []
        if head.opcode == PING:
            self.leg.send_frame(PONG, payload)
        elif head.opcode == CLOSE:
            code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
            reason = payload[2:].decode(errors="replace")
            self.leg.close(code if code not in (1005, 1006) else 1000, "")  # the close answered
            self._end(UpstreamClosed(code, reason))
        elif head.opcode in (TEXT, BINARY, CONTINUATION):
            self._message_part(head, payload)

    def _message_part(self, head: Head, payload: bytes) -> None:
        if (head.opcode == CONTINUATION) != (self._message_opcode is not None):
            self._fail(1002, "a message's frames came out of order")
            return
        if head.opcode != CONTINUATION:
            self._message_opcode = head.opcode
        self._message_size += len(payload)  # (within max_size: _refusal saw the frame's header)
        self._message.append(payload)
        if not head.fin:
            return
        whole = b"".join(self._message)
        if self._unread + len(whole) > self.max_size:
            self._fail(1008, f"over {self.max_size:,} bytes of messages nobody asked for")
            return
        self._message, self._message_opcode, self._message_size = [], None, 0
        try:
            text = whole.decode()
        except UnicodeDecodeError:
            self._fail(1007, "a message that is not UTF-8")
            return
        self._messages.append((text, len(whole)))
        self._unread += len(whole)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # keepalive and the end

    def _tick(self) -> None:
        if self.closed is not None:
            return
        if not self.leg.keep_alive(self.ping_s, time.monotonic()):
            self.leg.abort()
            self._end(UpstreamClosed(1011, "the replica stopped answering pings"))
            return
        self._ticking = asyncio.get_running_loop().call_later(self.ping_s / 2, self._tick)

    def _fail(self, code: int, reason: str) -> None:
        self.leg.close(code, reason)
        self._end(UpstreamClosed(code, f"envhub closed it: {reason}"))

    def _end(self, why: UpstreamClosed) -> None:
        if self.closed is not None:
            return
        self.closed = why
        self._ticking.cancel()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


async def connect_upstream(
    url: str, headers: dict[str, str], *, timeout_s: float, ping_s: float, max_size: int
) -> Upstream:
    """A socket to the replica's `/ws` (`url` is its http(s) address). HandshakeError, OSError or TimeoutError when
    it cannot be opened."""
    leg = await open_upstream(url, "ws", "", headers, timeout_s)
    return Upstream(leg, ping_s=ping_s, max_size=max_size)
