"""The WebSocket wire format as the gateway's relay reads and writes it (RFC 6455), checked against websockets."""

import json
from collections.abc import Iterator

import pytest
from websockets.frames import Frame, Opcode
from websockets.streams import StreamReader
from websockets.utils import accept_key

from gateway.legs import HandshakeError, Upgrade
from gateway.wire import BINARY, CLOSE, PING, TEXT, Cutter, Head, close_frame, frame


def parsed(data: bytes, *, masked: bool) -> Frame:
    """The frame websockets reads from these bytes."""
    reader = StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    parser = Frame.parse(reader.read_exact, mask=masked)
    with pytest.raises(StopIteration) as done:
        next(parser)
    result: Frame = done.value.value
    return result


def chunks(data: bytes, size: int) -> Iterator[bytes]:
    for at in range(0, len(data), size):
        yield data[at : at + size]


STREAM = [
    (TEXT, json.dumps({"type": "step", "data": {"row": 0}}).encode()),
    (BINARY, bytes(range(256)) * 2),  # a 16-bit length
    (PING, b"hi"),
    (TEXT, b"x" * 70_000),  # a 64-bit length
    (TEXT, b""),
]


@pytest.mark.parametrize("masked", [True, False], ids=["client's frames", "server's frames"])
@pytest.mark.parametrize("size", [1, 2, 3, 7, 100, 65_536, 1 << 20])
def test_the_cutter_finds_every_frame_however_the_stream_is_cut(masked: bool, size: int) -> None:
    closing = close_frame(4001, "done", masked=masked)
    stream = b"".join(frame(opcode, payload, masked=masked) for opcode, payload in STREAM) + closing
    cutter = Cutter()
    heads: list[Head] = []
    for chunk in chunks(stream, size):
        heads += cutter.feed(chunk)
    assert [(h.opcode, h.fin, h.length) for h in heads] == [
        *((opcode, True, len(payload)) for opcode, payload in STREAM),
        (CLOSE, True, 6),
    ]
    assert cutter.at_boundary
    # A close's code is read when its payload came with its header (always, when the stream came in one chunk).
    assert heads[-1].close() in ((4001, "done"), None)
    if size >= len(stream):
        assert heads[-1].close() == (4001, "done")
    cutter.feed(frame(TEXT, b"abc", masked=masked)[:-1])
    assert not cutter.at_boundary  # inside a frame: no frame of the relay's own may be written now


def test_the_frames_the_relay_writes_are_what_websockets_reads() -> None:
    for masked in (True, False):
        for size in (0, 5, 125, 126, 65_535, 65_536, 200_000):
            payload = bytes(i % 251 for i in range(size))
            read = parsed(frame(BINARY, payload, masked=masked), masked=masked)
            assert (read.opcode, read.fin, bytes(read.data)) == (Opcode.BINARY, True, payload)
        closing = parsed(close_frame(1011, "endpoint x lost this session " + "é" * 100, masked=masked), masked=masked)
        assert closing.opcode == Opcode.CLOSE
        assert len(closing.data) <= 125  # a close reason fits WebSocket's 123 bytes, cut on a character
        assert closing.data[:2] == (1011).to_bytes(2, "big")
        bytes(closing.data[2:]).decode()


def test_a_client_frames_step_error_and_close_are_read_through_its_mask() -> None:
    step = Cutter().feed(frame(TEXT, b'{"type": "step", "data": {}}', masked=True))[0]
    error = Cutter().feed(frame(TEXT, b' {"type":"error","data":{}}', masked=False))[0]
    reset = Cutter().feed(frame(TEXT, b'{"type": "reset"}', masked=True))[0]
    closing = Cutter().feed(close_frame(1000, "bye", masked=True))[0]
    assert step.is_step() and not step.is_error()
    assert error.is_error() and not error.is_step()
    assert not reset.is_step()
    assert closing.close() == (1000, "bye")


def answer_to(upgrade: Upgrade, *extra: str, status: str = "101 Switching Protocols") -> bytes:
    lines = [f"HTTP/1.1 {status}", "Upgrade: websocket", "Connection: Upgrade", *extra]
    if not any(line.lower().startswith("sec-websocket-accept") for line in extra):
        lines.append(f"Sec-WebSocket-Accept: {accept_key(upgrade.key)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_the_upstream_handshake_is_written_and_read_as_http_says() -> None:
    upgrade = Upgrade("/endpoints/e/ws?x=1", "127.0.0.1:8000", {"Authorization": "Bearer key"})
    assert upgrade.request.startswith(b"GET /endpoints/e/ws?x=1 HTTP/1.1\r\n")
    assert b"sec-websocket-version: 13\r\n" in upgrade.request.lower()
    answer = answer_to(upgrade) + frame(TEXT, b"hello", masked=False)
    assert upgrade.feed(answer[:10]) is None  # the head comes in pieces
    assert upgrade.feed(answer[10:]) == frame(TEXT, b"hello", masked=False)  # what followed it is kept


def test_a_handshake_answer_that_refuses_or_misleads_is_told_apart() -> None:
    refused = Upgrade("/ws", "h", {})
    with pytest.raises(HandshakeError) as http_403:
        refused.feed(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")
    assert (http_403.value.code, http_403.value.status) == ("refused", 403)
    wrong = Upgrade("/ws", "h", {})
    with pytest.raises(HandshakeError) as mismatched:
        wrong.feed(answer_to(wrong, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="))
    assert mismatched.value.code == "wrong_accept"
    compressed = Upgrade("/ws", "h", {})
    with pytest.raises(HandshakeError) as extended:
        compressed.feed(answer_to(compressed, "Sec-WebSocket-Extensions: permessage-deflate"))
    assert extended.value.code == "extensions"
    garbage = Upgrade("/ws", "h", {})
    with pytest.raises(HandshakeError) as not_http:
        garbage.feed(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
    assert not_http.value.code == "not_http"


def test_a_header_that_would_split_the_request_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(HandshakeError) as unwritable:
        Upgrade("/ws", "h", {"Authorization": "Bearer x\r\nX-Injected: yes"})
    assert unwritable.value.code == "unwritable"
