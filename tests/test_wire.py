"""The WebSocket wire format as the gateway's relay reads and writes it (RFC 6455), checked against websockets."""

import json
from collections.abc import Iterator

import pytest
from websockets.frames import Frame, Opcode
from websockets.streams import StreamReader

from gateway.wire import BINARY, CLOSE, PING, TEXT, Cutter, Head, accept_of, close_frame, frame


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


def test_the_handshake_answer_follows_the_rfc() -> None:
    assert accept_of("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455's own example
