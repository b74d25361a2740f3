"""WebSocket's wire format (RFC 6455), as much of it as relaying raw bytes needs.

The gateway passes a session's bytes through untouched once a replica has taken it. It reads
only frame headers (to know where frames begin, so that a frame of its own never lands
inside one, and to see closes), the first bytes of a text frame (steps and errors, for the
endpoint's figures) and a close frame's code. A client's frames stay masked on the way to
the replica, as a client's must be; a server's stay unmasked on the way back.
"""

import os
import struct
from dataclasses import dataclass

from protocol.frames import is_error_text, is_step_text, is_work_text

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_PEEK = 48  # bytes of a text frame read to tell a step or an error
_WORK_PEEK = 512  # bytes of a client's text frame read to tell whether it asks for work (its keys in any order)


@dataclass(slots=True)
class Head:
    """One frame's header, and where its payload starts in the bytes it was read from."""

    opcode: int
    fin: bool
    length: int
    mask: bytes  # b"" when unmasked
    chunk: bytes
    start: int

    def payload(self, limit: int) -> bytes:
        """Up to `limit` first bytes of the payload, unmasked: those that came with the header."""
        raw = self.chunk[self.start : self.start + min(limit, self.length)]
        return unmask(raw, self.mask) if self.mask else raw

    @property
    def is_message_end(self) -> bool:
        return self.fin and self.opcode in (TEXT, BINARY, CONTINUATION)

    def is_step(self) -> bool:
        return self.opcode == TEXT and is_step_text(self.payload(_PEEK))

    def is_work(self) -> bool:
        return self.opcode == TEXT and is_work_text(self.payload(_WORK_PEEK))

    def is_error(self) -> bool:
        return self.opcode == TEXT and is_error_text(self.payload(_PEEK))

    def close(self) -> tuple[int, str] | None:
        """A close frame's code and reason (None when the frame gives no code, or did not arrive whole)."""
        if self.opcode != CLOSE or self.length < 2 or self.start + self.length > len(self.chunk):
            return None
        payload = self.payload(self.length)
        return struct.unpack("!H", payload[:2])[0], payload[2:].decode(errors="replace")


def unmask(data: bytes, mask: bytes) -> bytes:
    size = len(data)
    key = int.from_bytes((mask * (size // 4 + 1))[:size], "little")
    return (int.from_bytes(data, "little") ^ key).to_bytes(size, "little")


class Cutter:
    """Finds where frames begin in one direction's byte stream, chunk by chunk, without copying payloads."""

    def __init__(self) -> None:
        self._partial = b""  # a header cut off by the end of a chunk
        self._left = 0  # payload bytes of the current frame still to come

    @property
    def at_boundary(self) -> bool:
        """Whether the bytes so far end exactly where a frame ends: a frame may be written now."""
        return not self._left and not self._partial

    def feed(self, data: bytes) -> list[Head]:
        """The headers of the frames that begin in these bytes."""
        heads: list[Head] = []
        if self._partial:
            data, self._partial = self._partial + data, b""
        size, at = len(data), 0
        if self._left:
            if self._left >= size:
                self._left -= size
                return heads
            at, self._left = self._left, 0
        while at < size:
            if size - at < 2:
                self._partial = data[at:]
                break
            first, second = data[at], data[at + 1]
            length = second & 0x7F
            header = 2 + (2 if length == 126 else 8 if length == 127 else 0) + (4 if second & 0x80 else 0)
            if size - at < header:
                self._partial = data[at:]
                break
            if length == 126:
                length = int.from_bytes(data[at + 2 : at + 4], "big")
            elif length == 127:
                length = int.from_bytes(data[at + 2 : at + 10], "big")
            mask = data[at + header - 4 : at + header] if second & 0x80 else b""
            start = at + header
            heads.append(Head(first & 0x0F, bool(first & 0x80), length, mask, data, start))
            at = start + length
            if at > size:
                self._left = at - size
                break
        return heads


def frame(opcode: int, payload: bytes = b"", *, masked: bool) -> bytes:
    """One whole frame: masked when a client writes it, unmasked when a server does."""
    size = len(payload)
    first = 0x80 | opcode
    flag = 0x80 if masked else 0
    if size < 126:
        header = struct.pack("!BB", first, flag | size)
    elif size < 1 << 16:
        header = struct.pack("!BBH", first, flag | 126, size)
    else:
        header = struct.pack("!BBQ", first, flag | 127, size)
    if not masked:
        return header + payload
    mask = os.urandom(4)
    return header + mask + unmask(payload, mask)


def close_frame(code: int, reason: str, *, masked: bool) -> bytes:
    """A close frame; the reason is cut to fit WebSocket's 123 bytes."""
    return frame(CLOSE, struct.pack("!H", code) + fit_reason(reason).encode(), masked=masked)


def fit_reason(text: str) -> str:
    """A close reason within WebSocket's 123 bytes."""
    encoded = text.encode()
    return text if len(encoded) <= 123 else encoded[:120].decode(errors="ignore") + "..."
