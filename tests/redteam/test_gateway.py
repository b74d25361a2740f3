"""The gateway under attack: hostile servers behind it, and hostile clients in front of it, over the real wire.

A server's first message, an answer the gateway reads whole and a client's body are bounded however long they
claim to be; frames a client must never send are closed with RFC 6455's codes; a request's head has a deadline; a
path encoded to smuggle a header stays encoded; an unknown endpoint id costs no SQL on the event loop; idle sockets,
junk frames and foreign web pages cannot squat a pool.
"""

import asyncio
import gc
import json
import secrets
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin

from app.settings import Settings
from gateway.server import HeadDeadlineProtocol
from tests.conftest import wait_until
from tests.environments import write_count_env
from tests.redteam.hostile import seen, write_hostile_env
from tests.serving import Envhub


@pytest.fixture
def gateway(settings: Settings, tmp_path: Path, templates_dir: Path) -> Iterator[Envhub]:
    """envhub with hostile servers among its templates, and small bounds to hit quickly."""
    for mode in ("record", "huge_first", "huge_answer"):
        write_hostile_env(templates_dir / mode, mode)
    write_count_env(templates_dir / "count")
    configured = settings.model_copy(
        update={
            "data_dir": tmp_path / "data",
            "header_timeout_s": 1.0,
            "body_timeout_s": 1.0,
            "gateway_max_body_bytes": 1024 * 1024,
            "pool_queue_s": 30,
            "pool_queue_per_client": 2,
        }
    )
    envhub = Envhub(configured)
    yield envhub
    envhub.stop()


def ws_url(envhub: Envhub, endpoint: dict[str, Any], path: str = "ws") -> str:
    return f"ws://127.0.0.1:{envhub.port}/endpoints/{endpoint['id']}/{path}"


def log_of(envhub: Envhub, endpoint: dict[str, Any]) -> Path:
    return envhub.settings.data_dir / "endpoints" / f"{endpoint['id']}.log"


def test_a_replicas_endless_first_message_never_stalls_envhub(gateway: Envhub) -> None:
    """A replica whose first message is 64 MiB used to be copied into one growing buffer chunk after chunk, and
    envhub's event loop stopped answering anyone."""
    endpoint = gateway.running("template:huge_first")
    answered: list[int] = []
    with connect(ws_url(gateway, endpoint), max_size=None, open_timeout=10) as ws:
        reading = threading.Thread(target=ws.recv, kwargs={"timeout": 60}, daemon=True)
        reading.start()
        with httpx.Client(base_url=gateway.url, timeout=5) as client:
            while reading.is_alive() and len(answered) < 20:
                answered.append(client.get("/api/health").status_code)
        reading.join(timeout=60)
    assert answered and set(answered) == {200}  # every health call answered within 5 s while the message streamed


def test_an_answer_the_gateway_reads_whole_is_cut_at_a_mebibyte(gateway: Envhub) -> None:
    endpoint = gateway.running("template:huge_answer")
    create = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}
    answer = gateway.http.post(f"/endpoints/{endpoint['id']}/mcp", json=create)
    assert (answer.status_code, answer.json()["code"]) == (502, "upstream_error")
    assert gateway.endpoint(endpoint["id"])["pool"]["sessions"] == 0  # the slot it took is free again


def test_bodies_past_the_limits_are_refused_with_413(gateway: Envhub) -> None:
    endpoint = gateway.running("template:record")
    base = f"/endpoints/{endpoint['id']}"
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": "x" * (1024 * 1024)}}
    too_long_a_call = gateway.http.post(f"{base}/mcp", json=call)
    assert (too_long_a_call.status_code, too_long_a_call.json()["code"]) == (413, "payload_too_large")

    declared = gateway.http.post(f"{base}/step", content=b"x" * (1024 * 1024 + 1))
    assert declared.status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
        for _ in range(40):
            yield b"x" * 65536

    streamed = gateway.http.post(f"{base}/step", content=chunks())
    assert streamed.status_code == 413
    small = gateway.http.post(f"{base}/step", content=b"x" * 1000)
    assert small.json() == {"path": "step", "received": 1000}


@pytest.mark.parametrize("trickle", [False, True])
def test_a_request_head_that_never_arrives_whole_is_answered_408(gateway: Envhub, trickle: bool) -> None:
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
        started = time.monotonic()
        if trickle:
            sock.sendall(b"GET /endpoints/abc/ws HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            sock.settimeout(0.2)
            answer = b""
            while not answer and time.monotonic() - started < 10:
                try:
                    sock.sendall(b"X")  # one byte of a header that never ends
                    answer = sock.recv(4096)
                except TimeoutError:
                    continue
                except OSError:
                    break
        else:
            answer = sock.recv(4096)  # silent: envhub speaks first, and closes
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"did not arrive within 1 s" in answer


def test_a_request_head_without_end_is_answered_431_and_stalls_no_one(gateway: Envhub) -> None:
    """A head had a deadline but no size, and httptools joins a long header's pieces by concatenation on the event
    loop: one client streaming a header without end kept /api/health from answering for half a minute."""
    answer: list[bytes] = []

    def stream() -> None:
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
            sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: ")
            for _ in range(16384):  # 1 GiB at most, looking for an answer between chunks
                if select.select([sock], [], [], 0.05)[0]:
                    answer.append(sock.recv(4096))
                    return
                sock.sendall(b"x" * 65536)

    streaming = threading.Thread(target=stream, daemon=True)
    streaming.start()
    answered: list[int] = []
    with httpx.Client(base_url=gateway.url, timeout=5) as client:
        while streaming.is_alive() and len(answered) < 20:
            answered.append(client.get("/api/health").status_code)
    streaming.join(timeout=60)
    assert answer and answer[0].startswith(b"HTTP/1.1 431"), answer
    assert set(answered) <= {200}  # every health call answered within 5 s while the header streamed


@pytest.mark.parametrize("path", ["step", "mcp"])
def test_a_request_body_that_never_arrives_whole_is_answered_408(gateway: Envhub, path: str) -> None:
    """A body, passed on (a step) or read by the gateway (an MCP call), had no deadline: a client trickling one
    held its connection, and its request's task, for good."""
    endpoint = gateway.running("template:record")
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
        sock.sendall(
            f"POST /endpoints/{endpoint['id']}/{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n".encode()
        )
        sock.settimeout(0.2)
        started, answer = time.monotonic(), b""
        while not answer and time.monotonic() - started < 20:
            try:
                sock.sendall(b" ")  # one byte of a body that never ends
                answer = sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
    assert answer.startswith(b"HTTP/1.1 408"), answer


def test_a_later_request_on_a_kept_connection_has_the_same_deadline_for_its_head(gateway: Envhub) -> None:
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200"), first
        time.sleep(0.6)  # idle between requests, as a kept connection is; the next head then takes its own second
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        sock.settimeout(0.2)
        started, answer = time.monotonic(), b""
        while not answer and time.monotonic() - started < 10:
            try:
                sock.sendall(b"X")
                answer = sock.recv(4096)
            except TimeoutError:
                continue
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert time.monotonic() - started >= 0.9  # its own second, not what was left of the first request's


def test_a_percent_encoded_line_break_stays_encoded_on_the_way_to_the_server(gateway: Envhub) -> None:
    endpoint = gateway.running("template:record")
    # A line feed matches no gateway path: refused, nothing is passed on. A bare CR and spaces pass on encoded.
    with (
        pytest.raises((ConnectionClosed, InvalidStatus)),
        connect(ws_url(gateway, endpoint, "ws%0D%0AX-Injected:%20yes")) as ws,
    ):
        ws.recv(timeout=10)
    assert gateway.http.get(f"/endpoints/{endpoint['id']}/a%0D%0AX-Injected:%20yes").status_code == 404
    with (
        pytest.raises((ConnectionClosed, InvalidStatus)),
        connect(ws_url(gateway, endpoint, "ws%0DX-Injected:%20yes")) as ws,
    ):
        ws.recv(timeout=10)  # no such path on the server
    answer = gateway.http.get(f"/endpoints/{endpoint['id']}/a%20b%0DX-Injected:%20yes")
    assert answer.status_code == 200
    wait_until(lambda: len([r for r in seen(log_of(gateway, endpoint)) if "Injected" in r["raw_path"]]) == 2)
    received = seen(log_of(gateway, endpoint))
    assert not any("x-injected" in r["headers"] for r in received), received
    paths = [r["raw_path"] for r in received if "Injected" in r["raw_path"]]
    assert len(paths) == 2, paths  # the WebSocket's handshake and the GET
    assert all("%0D" in p and "\r" not in p and "\n" not in p and " " not in p for p in paths), paths


def test_unknown_endpoint_ids_cost_no_sql_on_the_event_loop(gateway: Envhub) -> None:
    guessed = {secrets.token_hex(5) for _ in range(20)}
    with gateway.sql_on_the_loop() as on_the_loop:
        for guess in guessed:
            assert gateway.http.get(f"/endpoints/{guess}/health").status_code == 404
            with pytest.raises(ConnectionClosed) as closed, connect(ws_url(gateway, {"id": guess})) as ws:
                ws.recv(timeout=10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert [(s, p) for s, p in on_the_loop if any(g in str(p) for g in guessed)] == []


def test_a_web_page_from_another_site_cannot_open_sessions(gateway: Envhub) -> None:
    endpoint = gateway.running("template:count")
    evil = Origin("https://evil.example")
    with pytest.raises(ConnectionClosed) as closed, connect(ws_url(gateway, endpoint), origin=evil) as ws:
        ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    create = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}
    from_a_page = gateway.http.post(
        f"/endpoints/{endpoint['id']}/mcp", json=create, headers={"Origin": "https://evil.example"}
    )
    assert from_a_page.status_code == 403
    # envhub's own origin, and clients that send none (trainers), are served.
    own = Origin(f"http://127.0.0.1:{gateway.port}")
    for origin in (own, None):
        with connect(ws_url(gateway, endpoint), origin=origin) as ws:
            ws.send(json.dumps({"type": "reset", "data": {}}))
            assert json.loads(ws.recv(timeout=10))["type"] == "observation"


def test_idle_sockets_hold_no_sway_over_the_pools_size(gateway: Envhub) -> None:
    """Sockets that send nothing, or junk, or only ask for state, wait like any session but do not grow the pool;
    a reset does."""
    endpoint = gateway.running(
        "template:count", options={"env": {"MAX_CONCURRENT_ENVS": "1"}, "replicas": {"min": 1, "max": 4}}
    )
    with ExitStack() as stack:
        opened = [stack.enter_context(connect(ws_url(gateway, endpoint))) for _ in range(3)]
        wait_until(lambda: gateway.endpoint(endpoint["id"])["pool"]["waiting"] == 2)
        opened[1].send("x" * 100)  # a squatter's frames, held while it waits: no work asked for
        opened[1].send(json.dumps({"type": "state"}))
        deadline = time.monotonic() + 3  # several of the scaler's rounds: it would have grown by now
        while time.monotonic() < deadline:
            assert len(gateway.endpoint(endpoint["id"])["pool"]["replicas"]) == 1
            time.sleep(0.2)
        opened[2].send(json.dumps({"type": "reset", "data": {}}))  # a waiting session starts working
        assert json.loads(opened[2].recv(timeout=60))["type"] == "observation"
        assert len(gateway.endpoint(endpoint["id"])["pool"]["replicas"]) >= 2  # it grew once a session worked


def test_one_client_may_have_only_so_many_sessions_waiting(gateway: Envhub) -> None:
    endpoint = gateway.running("template:count", options={"env": {"MAX_CONCURRENT_ENVS": "1"}})
    with ExitStack() as stack:
        for _ in range(3):  # one holds the only slot, two wait
            stack.enter_context(connect(ws_url(gateway, endpoint)))
        wait_until(lambda: gateway.endpoint(endpoint["id"])["pool"]["waiting"] == 2)
        with connect(ws_url(gateway, endpoint)) as third:
            refusal = json.loads(third.recv(timeout=10))  # at once: the wait would be 30 s
        assert refusal["type"] == "error" and refusal["data"]["code"] == "CAPACITY_REACHED"
        assert (refusal["data"]["limit"], refusal["data"]["waiting"]) == ("queue_per_client", 2)


def test_a_waiting_session_cannot_park_megabytes_in_envhub(gateway: Envhub) -> None:
    endpoint = gateway.running("template:count", options={"env": {"MAX_CONCURRENT_ENVS": "1"}})
    with connect(ws_url(gateway, endpoint)):  # holds the only slot

        async def push() -> int:
            """Bytes of one endless frame the gateway (and the kernel between) takes from a waiting client."""
            reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
            writer.write(
                f"GET /endpoints/{endpoint['id']}/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n".encode()
            )
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"\x82\xff" + (1 << 40).to_bytes(8, "big") + b"\x00\x00\x00\x00")  # masked, 1 TiB
            sent, chunk = 0, b"x" * 65536
            while sent < 64 * 1024 * 1024:
                writer.write(chunk)
                try:
                    await asyncio.wait_for(writer.drain(), 2)
                except TimeoutError:
                    break  # nobody reads any more
                sent += len(chunk)
            writer.transport.abort()
            return sent

        assert asyncio.run(push()) < 16 * 1024 * 1024  # the cap, plus what loopback's buffers hold


def _client_frame(first: int, payload: bytes, *, masked: bool = True) -> bytes:
    """A client's frame written by hand, to break the rules: `first` is its first byte (FIN, RSV, opcode)."""
    size = len(payload)
    head = bytes([first])
    mask_bit = 0x80 if masked else 0
    if size < 126:
        head += bytes([mask_bit | size])
    else:
        head += bytes([mask_bit | 126]) + size.to_bytes(2, "big")
    if not masked:
        return head + payload
    key = secrets.token_bytes(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


# What RFC 6455 says a server closes with, for frames a client must never send (1002: protocol error, 1007: data
# that is not what its type says).
MALFORMED = {
    "unmasked": (_client_frame(0x81, b'{"type": "state"}', masked=False), 1002),
    "reserved bit": (_client_frame(0xC1, b"{}"), 1002),
    "reserved opcode": (_client_frame(0x83, b"{}"), 1002),
    "long ping": (_client_frame(0x89, b"p" * 126), 1002),
    "fragmented ping": (_client_frame(0x09, b"p"), 1002),
    "stray continuation": (_client_frame(0x80, b"{}"), 1002),
    "text inside a message": (_client_frame(0x01, b'{"type"') + _client_frame(0x81, b"{}"), 1002),
    "text not UTF-8": (_client_frame(0x81, b'{"a": "\xff\xfe"}'), 1007),
    "close of one byte": (_client_frame(0x88, b"\x03"), 1002),
    "close with a reserved code": (_client_frame(0x88, (1005).to_bytes(2, "big")), 1002),
    "close reason not UTF-8": (_client_frame(0x88, (1000).to_bytes(2, "big") + b"\xff"), 1007),
}


async def _close_code_after(port: int, endpoint_id: str, malformed: bytes) -> int | None:
    """A session that played a reset, then the malformed bytes: the code of the close the client gets."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"GET /endpoints/{endpoint_id}/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    await reader.readuntil(b"\r\n\r\n")
    writer.write(_client_frame(0x81, json.dumps({"type": "reset", "data": {}}).encode()))
    code: int | None = None
    try:
        for round_ in range(2):  # the reset's observation, then what the malformed frame brings
            if round_ == 1:
                writer.write(malformed)
            head = await asyncio.wait_for(reader.readexactly(2), 30)
            size = head[1] & 0x7F
            if size == 126:
                size = int.from_bytes(await reader.readexactly(2), "big")
            elif size == 127:
                size = int.from_bytes(await reader.readexactly(8), "big")
            payload = await reader.readexactly(size)
            if head[0] & 0x0F == 0x8:
                code = int.from_bytes(payload[:2], "big")
                break
            assert round_ == 0 and b"observation" in payload, payload[:200]
    finally:
        writer.close()
    return code


def test_malformed_frames_get_the_close_codes_rfc_6455_gives_them(gateway: Envhub) -> None:
    endpoint = gateway.running("template:count")
    codes = {
        kind: asyncio.run(_close_code_after(gateway.port, endpoint["id"], malformed))
        for kind, (malformed, _) in MALFORMED.items()
    }
    assert codes == {kind: code for kind, (_, code) in MALFORMED.items()}
    wait_until(lambda: gateway.endpoint(endpoint["id"])["pool"]["sessions"] == 0, timeout_s=5)  # and none is held


def test_a_session_past_the_head_deadline_stays_open_and_leaves_no_handshake_behind(gateway: Envhub) -> None:
    """Once a socket is a WebSocket's, its HTTP protocol (and the timer that watched its heads) lets go of it."""
    endpoint = gateway.running("template:count", options={"env": {"MAX_CONCURRENT_ENVS": "8"}})

    def http_protocols() -> int:
        gc.collect()
        return sum(isinstance(o, HeadDeadlineProtocol) for o in gc.get_objects())

    before = http_protocols()
    with ExitStack() as stack:
        sessions = [stack.enter_context(connect(ws_url(gateway, endpoint))) for _ in range(5)]
        for ws in sessions:
            ws.send(json.dumps({"type": "reset", "data": {}}))
            assert json.loads(ws.recv(timeout=10))["type"] == "observation"
        time.sleep(1.5)  # past the 1 s deadline on a request's head: a session's socket has none
        for ws in sessions:
            ws.send(json.dumps({"type": "step", "data": {"add": 1}}))
            assert json.loads(ws.recv(timeout=10))["type"] == "observation"
        assert http_protocols() <= before
