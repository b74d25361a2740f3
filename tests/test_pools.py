"""Endpoint pools through the gateway: replicas behind one URL, against count servers capped low, as trainers
load them."""

import base64
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv import GenericEnvClient
from sqlmodel import Session
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from app.settings import Settings
from core.db import create_db_engine
from hosting.models import Replica
from tests.conftest import wait_until
from tests.environments import write_echo_env
from tests.serving import Envhub

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="finding servers by their marker needs /proc")


@pytest.fixture
def pools(settings: Settings, tmp_path: Path, count_template: str) -> Iterator[Envhub]:
    """envhub with short pool timings: a session waits 3 s for a slot, idle replicas go after 1 s, pings every 0.5 s."""
    server = Envhub(
        settings.model_copy(
            update={"data_dir": tmp_path / "data", "pool_queue_s": 3, "pool_idle_s": 1, "ws_ping_s": 0.5}
        )
    )
    yield server
    server.stop()


@pytest.fixture
def opened() -> Iterator[ExitStack]:
    """Where a test opens WebSockets: each is closed at its end."""
    with ExitStack() as stack:
        yield stack


def open_ws(stack: ExitStack, url: str) -> ClientConnection:
    return stack.enter_context(connect(url, open_timeout=10))


def ws_url(endpoint: dict[str, Any], query: str = "") -> str:
    url: str = endpoint["url"]
    return url.replace("http", "ws", 1) + "/ws" + (f"?{query}" if query else "")


def ask(ws: ClientConnection, frame: dict[str, Any]) -> dict[str, Any]:
    ws.send(json.dumps(frame))
    answer: dict[str, Any] = json.loads(ws.recv(timeout=20))
    return answer


def play(ws: ClientConnection, steps: int = 3) -> None:
    """A reset and a few steps, each answered with an observation."""
    assert ask(ws, {"type": "reset", "data": {}})["type"] == "observation"
    for _ in range(steps):
        assert ask(ws, {"type": "step", "data": {"add": 1}})["type"] == "observation"


def kinds(envhub: Envhub, endpoint_id: str) -> list[str]:
    """The kinds of the pool's last events, newest first."""
    return [e["kind"] for e in envhub.endpoint(endpoint_id)["pool"]["events"]]


def server_pid(settings: Settings, replica_id: str) -> int:
    """The process serving a replica, as its row's handle says."""
    engine = create_db_engine(settings.database_url)
    try:
        with Session(engine) as session:
            replica = session.get(Replica, replica_id)
    finally:
        engine.dispose()
    assert replica is not None, f"no replica {replica_id}"
    return int(replica.handle["pid"])


def test_a_pool_holds_more_sessions_than_one_server_and_a_refusal_is_retried_unseen(
    pools: Envhub, opened: ExitStack
) -> None:
    # Three servers that hold 8 sessions each and never told envhub so: their refusals say it.
    endpoint = pools.running("template:count", options={"replicas": 3, "env": {"COUNT_CAP": "8"}})
    wait_until(lambda: len(pools.ready_replicas(endpoint["id"])) == 3, timeout_s=30)
    first = pools.ready_replicas(endpoint["id"])[0]
    # Another client fills the first server behind envhub's back, so the gateway still believes it free.
    elsewhere = [open_ws(opened, first["internal_url"].replace("http", "ws", 1) + "/ws") for _ in range(8)]
    for ws in elsewhere:
        play(ws, 0)

    sockets = [open_ws(opened, ws_url(endpoint)) for _ in range(16)]
    with ThreadPoolExecutor(16) as run:
        list(run.map(play, sockets))  # all 16 at once: none saw the first server's refusals

    pool = pools.endpoint(endpoint["id"])["pool"]
    by_id = {r["id"]: r for r in pool["replicas"]}
    assert by_id[first["id"]]["sessions"] == 0
    assert (by_id[first["id"]]["capacity"], by_id[first["id"]]["capacity_said"]) == (8, True)
    assert sorted(r["sessions"] for r in pool["replicas"]) == [0, 8, 8]
    assert {r["capacity"] for r in pool["replicas"]} == {8}  # learned: refused beyond 8, or took 8
    assert (pool["sessions"], pool["capacity"], pool["capacity_at_max"]) == (16, 24, 24)
    opened.close()
    wait_until(lambda: pools.endpoint(endpoint["id"])["pool"]["sessions"] == 0)


def test_generic_env_clients_through_one_url(pools: Envhub) -> None:
    endpoint = pools.running("template:count", options={"replicas": 2, "env": {"MAX_CONCURRENT_ENVS": "4"}})
    wait_until(lambda: len(pools.ready_replicas(endpoint["id"])) == 2, timeout_s=30)
    opened = threading.Barrier(8, timeout=30)

    def episode(number: int) -> float:
        with GenericEnvClient(base_url=endpoint["url"], message_timeout_s=20).sync() as client:
            client.reset(episode_id=f"ep-{number}")
            opened.wait()  # all eight hold a session at once
            reward = 0.0
            for _ in range(2):
                result = client.step({"add": 5})
                reward = result.reward or 0.0
            assert client.state()["episode_id"] == f"ep-{number}"
            return reward

    with ThreadPoolExecutor(8) as run:
        assert list(run.map(episode, range(8))) == [1.0] * 8


def test_a_full_pool_queues_a_session_until_a_slot_frees_then_refuses_with_its_numbers(
    pools: Envhub, opened: ExitStack
) -> None:
    endpoint = pools.running("template:count", options={"env": {"MAX_CONCURRENT_ENVS": "2"}})
    first, second = (open_ws(opened, ws_url(endpoint)) for _ in range(2))
    play(first, 1)
    play(second, 1)
    waiting = open_ws(opened, ws_url(endpoint))
    waiting.send(json.dumps({"type": "reset", "data": {}}))  # held by the gateway while the session waits
    wait_until(lambda: pools.endpoint(endpoint["id"])["pool"]["waiting"] == 1)
    first.close()
    assert json.loads(waiting.recv(timeout=10))["type"] == "observation"  # the freed slot went to it

    refused = open_ws(opened, ws_url(endpoint))
    started = time.monotonic()
    frame = json.loads(refused.recv(timeout=10))
    assert time.monotonic() - started >= 2.5  # it waited (ENVHUB_POOL_QUEUE_S is 3 here) before the refusal
    assert frame["type"] == "error"
    assert frame["data"]["code"] == "CAPACITY_REACHED"
    assert (frame["data"]["active_sessions"], frame["data"]["max_sessions"]) == (2, 2)
    limit = {k: frame["data"][k] for k in ("limit", "replicas", "max_replicas", "waited_s")}
    assert limit == {"limit": "queue_s", "replicas": 1, "max_replicas": 1, "waited_s": 3}  # at its most replicas
    with pytest.raises(ConnectionClosed) as closed:
        refused.recv(timeout=5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000


def test_a_pool_grows_while_sessions_wait_and_shrinks_when_idle(
    settings: Settings, tmp_path: Path, count_template: str, opened: ExitStack
) -> None:
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "pool_queue_s": 30, "pool_idle_s": 1}))
    try:
        endpoint = envhub.running(
            "template:count", options={"replicas": {"min": 1, "max": 3}, "env": {"MAX_CONCURRENT_ENVS": "2"}}
        )
        sockets = [open_ws(opened, ws_url(endpoint)) for _ in range(6)]
        with ThreadPoolExecutor(6) as run:
            list(run.map(play, sockets))  # three servers' worth: the pool grew to hold them
        pool = envhub.endpoint(endpoint["id"])["pool"]
        assert [r["sessions"] for r in pool["replicas"] if r["status"] == "ready"] == [2, 2, 2]
        assert "grow" in [e["kind"] for e in pool["events"]]
        opened.close()
        wait_until(lambda: kinds(envhub, endpoint["id"]).count("shrink") == 2, timeout_s=20)
        pool = envhub.endpoint(endpoint["id"])["pool"]
        assert sorted(r["status"] for r in pool["replicas"]) == ["ready", "stopped", "stopped"]
        with connect(ws_url(endpoint)) as ws:
            play(ws)  # the one left serves
    finally:
        envhub.stop()


def rpc(envhub: Envhub, endpoint: dict[str, Any], method: str, params: dict[str, Any] | None = None) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    return envhub.http.post(f"{endpoint['url']}/mcp", json=body).json()


def test_mcp_sessions_stay_on_the_replica_that_made_them(pools: Envhub, opened: ExitStack) -> None:
    endpoint = pools.running("template:count", options={"replicas": 2, "env": {"MAX_CONCURRENT_ENVS": "3"}})
    wait_until(lambda: len(pools.ready_replicas(endpoint["id"])) == 2, timeout_s=30)
    made = [rpc(pools, endpoint, "openenv/session/create")["result"]["session_id"] for _ in range(4)]
    pool = pools.endpoint(endpoint["id"])["pool"]
    assert sorted(r["sessions"] for r in pool["replicas"]) == [2, 2]  # spread, and each holds its slot
    for session_id in made:
        # Attached over WebSocket: only the replica that made it knows the id.
        with connect(ws_url(endpoint, f"session_id={session_id}")) as ws:
            play(ws, 1)
    unknown = open_ws(opened, ws_url(endpoint, "session_id=nope"))
    frame = json.loads(unknown.recv(timeout=10))
    assert frame["data"]["code"] == "SESSION_ERROR"  # the server's own answer
    assert "Unknown session_id" in frame["data"]["message"]
    for session_id in made:
        closed = rpc(pools, endpoint, "openenv/session/close", {"session_id": session_id})
        assert closed["result"]["closed"] is True
    assert pools.endpoint(endpoint["id"])["pool"]["sessions"] == 0
    unknown_call = rpc(pools, endpoint, "openenv/session/close", {"session_id": "nope"})
    assert unknown_call["error"]["code"] == -32602  # the server's own answer: no such session, as invalid params


def _sessions_on(stack: ExitStack, endpoint: dict[str, Any], count: int) -> list[ClientConnection]:
    sockets = [open_ws(stack, ws_url(endpoint)) for _ in range(count)]
    for ws in sockets:
        play(ws, 1)
    return sockets


@pytest.mark.parametrize("how", ["killed", "hung"])
def test_a_replica_that_dies_or_hangs_ends_its_sessions_with_a_reason_and_is_replaced(
    pools: Envhub, settings: Settings, opened: ExitStack, how: str
) -> None:
    endpoint = pools.running("template:count", options={"replicas": 2, "env": {"MAX_CONCURRENT_ENVS": "2"}})
    wait_until(lambda: len(pools.ready_replicas(endpoint["id"])) == 2, timeout_s=30)
    sockets = _sessions_on(opened, endpoint, 4)
    victim = f"{endpoint['id']}-2"
    pid = server_pid(settings, victim)
    pool = pools.endpoint(endpoint["id"])["pool"]
    assert [r["sessions"] for r in pool["replicas"] if r["id"] == victim] == [
        2
    ]  # read before the kill, which frees them
    started = time.monotonic()
    # The server's whole process group: a server in a view of its own runs as the child of the process its row names.
    os.killpg(pid, signal.SIGKILL if how == "killed" else signal.SIGSTOP)
    try:
        survivors, lost = [], []
        for ws in sockets:
            try:
                play(ws, 1)  # on the hung server, the step goes unanswered until the gateway ends the session
                survivors.append(ws)
            except ConnectionClosed:
                lost.append(ws)
        assert len(lost) == 2 and len(survivors) == 2
        for ws in lost:
            assert ws.close_code == 1011
            assert f"endpoint {endpoint['id']} lost this session" in (ws.close_reason or "")
        assert time.monotonic() - started < 10
        serving = {endpoint["id"], f"{endpoint['id']}-3"}  # the first, and the one that took the victim's place
        wait_until(lambda: {r["id"] for r in pools.ready_replicas(endpoint["id"])} == serving, timeout_s=20)

        # The replacement is recorded as the new replica starts; the event may land a moment after it serves.
        def kinds() -> set[str]:
            return {e["kind"] for e in pools.endpoint(endpoint["id"])["pool"]["events"]}

        wait_until(lambda: {"lost", "replace"} <= kinds(), timeout_s=20)
        row = pools.endpoint(endpoint["id"])
        gone = next(r for r in row["pool"]["replicas"] if r["id"] == victim)
        assert gone["status"] == "failed"
        expected = "killed by signal 9" if how == "killed" else "stopped answering"
        assert expected in gone["last_error"]
        for ws in survivors:
            play(ws, 1)  # the other replica's sessions went on
        with connect(ws_url(endpoint)) as fresh:
            play(fresh)
    finally:
        if how == "hung":
            with_pid_gone(pid)


def with_pid_gone(pid: int) -> None:
    """A stopped server the pool left behind would never exit: it must have been killed."""
    wait_until(lambda: not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()[-60:], 15)


def _vanishing_client(url: str) -> socket.socket:
    """A WebSocket client that opens a session, then never reads or answers again, and never closes."""
    host, port = url.removeprefix("ws://").split("/", 1)[0].split(":")
    path = "/" + url.removeprefix("ws://").split("/", 1)[1]
    raw = socket.create_connection((host, int(port)))
    key = base64.b64encode(os.urandom(16)).decode()
    raw.sendall(
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    assert b" 101 " in raw.recv(4096).split(b"\r\n", 1)[0]
    payload = json.dumps({"type": "reset", "data": {}}).encode()
    mask = os.urandom(4)
    raw.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
    return raw


def test_clients_that_vanish_without_a_close_free_their_slots(pools: Envhub) -> None:
    endpoint = pools.running("template:count", options={"env": {"MAX_CONCURRENT_ENVS": "2"}})
    vanished_at = time.monotonic()
    vanished = [_vanishing_client(ws_url(endpoint)) for _ in range(2)]  # they never answer a ping
    try:
        wait_until(lambda: pools.endpoint(endpoint["id"])["stats"]["sessions"] == 2)  # both were placed
        wait_until(lambda: pools.endpoint(endpoint["id"])["pool"]["sessions"] == 0, timeout_s=5)
        # Pings every 0.5 s, each answered within one interval or the client is closed: two intervals, and some
        # slack for this machine.
        assert time.monotonic() - vanished_at < 2 * 0.5 + 1
        with connect(ws_url(endpoint)) as ws:
            play(ws)
    finally:
        for raw in vanished:
            raw.close()


def test_a_quiet_session_stays_open_while_the_gateway_pings(pools: Envhub) -> None:
    """A model generating for minutes: the session idles through many ping intervals, then steps."""
    endpoint = pools.running("template:count")
    with connect(ws_url(endpoint)) as ws:
        play(ws, 1)
        quiet = 20 * 0.5  # twenty ping intervals, each answered within its 0.5 s timeout
        deadline = time.monotonic() + quiet
        while time.monotonic() < deadline:
            with pytest.raises(TimeoutError):
                ws.recv(timeout=deadline - time.monotonic())  # nothing arrives, and nothing closes
        play(ws, 1)


def test_a_500_does_not_make_the_next_request_a_502(settings: Settings, tmp_path: Path, templates_dir: Path) -> None:
    write_echo_env(templates_dir / "echo")
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data"}))
    try:
        endpoint = envhub.running("template:echo")
        with httpx.Client(timeout=10) as client:
            for _ in range(40):
                assert client.post(f"{endpoint['url']}/boom", content=b"{}").status_code == 500
                # The server closed the connection after its 500; the next request is served, never a 502.
                assert client.get(f"{endpoint['url']}/after").json() == {"path": "after"}
                assert client.get(f"{endpoint['url']}/boom").status_code == 500
                assert client.get(f"{endpoint['url']}/again").json() == {"path": "again"}
    finally:
        envhub.stop()


def test_replicas_count_against_the_server_limits(settings: Settings, tmp_path: Path, count_template: str) -> None:
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "max_servers": 3}))
    try:
        envhub.running("template:count", options={"replicas": 2})
        refused = envhub.http.post("/api/endpoints", json={"environment": "template:count", "options": {"replicas": 2}})
        assert (refused.status_code, refused.json()["code"]) == (429, "servers_limit")
        assert envhub.http.post("/api/endpoints", json={"environment": "template:count"}).status_code == 201
    finally:
        envhub.stop()


@pytest.mark.parametrize(
    ("replicas", "error"),
    [
        ({"min": 3, "max": 2}, (["options", "process", "replicas"], "replicas_max_below_min")),
        (0, (["options", "process", "replicas", "min"], "greater_than_equal")),
        (True, (["options", "process", "replicas"], "replicas_not_count")),
    ],
)
def test_bad_replicas_are_422(pools: Envhub, replicas: Any, error: tuple[list[str], str]) -> None:
    response = pools.http.post(
        "/api/endpoints", json={"environment": "template:count", "options": {"replicas": replicas}}
    )
    assert (response.status_code, response.json()["code"]) == (422, "invalid_request")
    assert error in [(e["loc"], e["type"]) for e in response.json()["errors"]]
    space = pools.http.post(
        "/api/endpoints", json={"environment": "template:count", "backend": "space", "options": {"replicas": 2}}
    )
    assert [e["type"] for e in space.json()["errors"]] == ["space_one_server"]


def test_stateless_http_is_spread_over_the_replicas(settings: Settings, tmp_path: Path, templates_dir: Path) -> None:
    write_echo_env(templates_dir / "echo")
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data"}))
    try:
        endpoint = envhub.running("template:echo", options={"replicas": 2})
        wait_until(lambda: len(envhub.ready_replicas(endpoint["id"])) == 2, timeout_s=30)
        servers = {r["internal_url"].removeprefix("http://") for r in envhub.ready_replicas(endpoint["id"])}
        seen = {envhub.http.get(f"{endpoint['url']}/headers").json()["host"] for _ in range(6)}
        assert seen == servers
    finally:
        envhub.stop()


def test_mcp_over_websocket_is_placed_like_any_session(pools: Envhub, opened: ExitStack) -> None:
    endpoint = pools.running("template:count", options={"replicas": 2, "env": {"COUNT_CAP": "1"}})
    wait_until(lambda: len(pools.ready_replicas(endpoint["id"])) == 2, timeout_s=30)
    mcp = endpoint["url"].replace("http", "ws", 1) + "/mcp"
    held = [open_ws(opened, mcp) for _ in range(2)]
    for ws in held:
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}))
        assert json.loads(ws.recv(timeout=10))["id"] == 1  # each got a server of its own
    assert sorted(r["sessions"] for r in pools.ready_replicas(endpoint["id"])) == [1, 1]

    refused = open_ws(opened, mcp)  # both servers refuse it; after the queue, the pool says so as MCP does
    answer = json.loads(refused.recv(timeout=10))
    assert answer["error"]["code"] == -32000
    assert answer["error"]["data"] == {
        "active_sessions": 2,
        "max_sessions": 2,
        "limit": "queue_s",
        "replicas": 2,
        "max_replicas": 2,
        "waited_s": 3,
    }


def test_a_client_that_sends_after_the_pool_refused_it_still_reads_the_refusal(
    settings: Settings, tmp_path: Path, count_template: str
) -> None:
    """envhub's refusal ends with a close, and a client may have sent something (a pong) that crosses it. A socket
    shut as the close went out answers that with a reset, and the client's close reply then fails (websockets' client
    drops the frames it had read with it, the refusal among them): envhub keeps reading until the client closes."""
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "pool_queue_s": 1}))
    try:
        endpoint = envhub.running(count_template, options={"env": {"COUNT_CAP": "1"}})
        with connect(ws_url(endpoint), open_timeout=10) as held:
            held.send(json.dumps({"type": "reset", "data": {}}))
            held.recv(timeout=10)
            with socket.create_connection(("127.0.0.1", envhub.port), timeout=10) as raw:
                raw.sendall(
                    f"GET /endpoints/{endpoint['id']}/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                    "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                    "Sec-WebSocket-Version: 13\r\n\r\n".encode()
                )
                time.sleep(2.5)  # the queue's second passes: the refusal and the close arrive, unread
                raw.sendall(bytes([0x8A, 0x80]) + os.urandom(4))  # an unsolicited pong, masked, crosses them
                time.sleep(0.5)
                raw.sendall(bytes([0x88, 0x82]) + bytes(4) + (1000).to_bytes(2, "big"))  # the close reply goes out
                received = b""
                while chunk := raw.recv(65536):
                    received += chunk
    finally:
        envhub.stop()
    assert b"101 Switching Protocols" in received
    assert b"CAPACITY_REACHED" in received, received[-300:]
    assert bytes([0x88, 0x02]) + (1000).to_bytes(2, "big") in received  # then the close, 1000
