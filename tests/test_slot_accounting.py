"""A replica's slots come back: after envhub's own checks, after clients that leave at the worst moment, and after
MCP sessions nobody closes, a pool's session count returns to 0 and the next session is served at once."""

import asyncio
import json
import os
import signal
import socket
import struct
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from app.settings import Settings
from gateway.wire import TEXT, frame
from tests.conftest import wait_until
from tests.serving import Envhub
from tests.test_endpoints import endpoint_pid

ONE_SLOT = {"env": {"MAX_CONCURRENT_ENVS": "1"}}
CREATE = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}


@pytest.fixture
def envhub(settings: Settings, tmp_path: Path, count_template: str) -> Iterator[Envhub]:
    server = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "mcp_session_idle_s": 2}))
    yield server
    server.stop()


def ws_url(envhub: Envhub, endpoint: dict[str, Any]) -> str:
    return f"ws://127.0.0.1:{envhub.port}/endpoints/{endpoint['id']}/ws"


def sessions(envhub: Envhub, endpoint: dict[str, Any]) -> int:
    count: int = envhub.endpoint(endpoint["id"])["pool"]["sessions"]
    return count


def served_at_once(endpoint: dict[str, Any]) -> None:
    """A new session gets its reset answered without waiting for a slot."""
    with GenericEnvClient(base_url=endpoint["url"], connect_timeout_s=5, message_timeout_s=5).sync() as env:
        assert env.reset().observation is not None


@pytest.mark.parametrize("suite", ["protocol", pytest.param("quality", marks=pytest.mark.slow)])
def test_envhubs_own_checks_give_the_only_slot_back(envhub: Envhub, suite: str) -> None:
    endpoint = envhub.running("template:count", options=ONE_SLOT)
    filed = envhub.http.post("/api/checks", json={"endpoint": endpoint["id"], "suite": suite}, timeout=120)
    assert filed.status_code == 201, filed.text
    # A pool that holds one session queues a second rather than refusing it: the checks that need two say so.
    assert filed.json()["verdict"] in ("pass", "warn"), filed.json()
    wait_until(lambda: sessions(envhub, endpoint) == 0, timeout_s=2)
    served_at_once(endpoint)


@pytest.mark.parametrize("suite", ["protocol", pytest.param("quality", marks=pytest.mark.slow)])
def test_checks_of_servers_that_never_said_they_hold_one_session_skip_what_needs_two(
    envhub: Envhub, suite: str
) -> None:
    # COUNT_CAP holds its server to one session without telling envhub: the pool learns it when the check's second
    # session is refused, and queues that session rather than serving it. openenv's default (the official
    # environments) is the same.
    endpoint = envhub.running("template:count", options={"env": {"COUNT_CAP": "1"}})
    filed = envhub.http.post("/api/checks", json={"endpoint": endpoint["id"], "suite": suite}, timeout=120)
    assert filed.status_code == 201, filed.text
    report = filed.json()["report"]
    if suite == "protocol":
        results = {r["check_id"]: r for r in report["results"]}
        broken = {i: r["evidence"] for i, r in results.items() if r["status"] in ("fail", "error")}
        assert not broken, broken
        for skipped in ("22", "23"):
            assert results[skipped]["status"] == "skip"
            assert "each of the endpoint's servers holds one session" in results[skipped]["evidence"][0]
    else:
        isolation = next(r for r in report["results"] if r["check_id"] == "runtime.episode_isolation")
        assert isolation["status"] == "skip", isolation
        assert isolation["evidence"] == [
            "each of the endpoint's servers holds one session at a time: isolation needs two on one"
        ]
    wait_until(lambda: sessions(envhub, endpoint) == 0, timeout_s=2)
    served_at_once(endpoint)


def test_an_mcp_session_asked_for_by_a_client_that_left_while_it_waited_is_not_made(envhub: Envhub) -> None:
    endpoint = envhub.running("template:count", options=ONE_SLOT)
    with connect(f"ws://127.0.0.1:{envhub.port}/endpoints/{endpoint['id']}/ws") as holding:
        holding.send(json.dumps({"type": "reset", "data": {}}))
        holding.recv(timeout=10)

        async def ask_and_leave() -> None:  # the create waits for the held slot; its client gives up first
            async with httpx.AsyncClient(base_url=envhub.url) as client:
                with pytest.raises(httpx.ReadTimeout):
                    await client.post(f"/endpoints/{endpoint['id']}/mcp", json=CREATE, timeout=1)

        asyncio.run(ask_and_leave())
        # Its place in the queue goes with it, while the slot is still held: nothing is made for nobody later.
        wait_until(lambda: envhub.endpoint(endpoint["id"])["pool"]["waiting"] == 0, timeout_s=2)
    wait_until(lambda: sessions(envhub, endpoint) == 0, timeout_s=2)
    served_at_once(endpoint)


def test_an_mcp_session_its_client_forgot_is_closed_once_idle(envhub: Envhub) -> None:
    endpoint = envhub.running("template:count", options=ONE_SLOT)
    made = envhub.http.post(f"/endpoints/{endpoint['id']}/mcp", json=CREATE).json()
    assert isinstance(made["result"]["session_id"], str)
    assert sessions(envhub, endpoint) == 1
    wait_until(lambda: sessions(envhub, endpoint) == 0, timeout_s=40)  # idle 2 s, then the next round closes it
    served_at_once(endpoint)


def _raw_session(port: int, endpoint_id: str) -> socket.socket:
    """A WebSocket handshake by hand, through the gateway: the socket, open."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(
        f"GET /endpoints/{endpoint_id}/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 101"), answer[:100]
    return sock


def _abort(sock: socket.socket) -> None:
    """Close with a TCP reset: no close frame, no FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_a_mix_of_clients_leaves_every_slot_free(envhub: Envhub) -> None:
    """After every kind of session a pool of one-session servers meets, back to 0 within 2 s of its last client
    leaving, and the next session is served at once."""
    endpoint = envhub.running("template:count", options={**ONE_SLOT, "replicas": {"min": 1, "max": 2}})
    url = ws_url(envhub, endpoint)
    reset = json.dumps({"type": "reset", "data": {}})

    def settled(what: str) -> None:
        wait_until(lambda: sessions(envhub, endpoint) == 0, timeout_s=2)
        served_at_once(endpoint)
        assert envhub.endpoint(endpoint["id"])["pool"]["waiting"] == 0, what

    with connect(url) as ws:  # a normal session
        ws.send(reset)
        assert json.loads(ws.recv(timeout=30))["type"] == "observation"
    settled("normal")

    with connect(url) as ws:  # a malformed frame: the server closes it
        ws.send("{not json")
        assert json.loads(ws.recv(timeout=30))["type"] == "error"
    settled("malformed")

    played = _raw_session(envhub.port, endpoint["id"])  # aborted mid-session
    played.sendall(frame(TEXT, reset.encode(), masked=True))
    assert b"observation" in played.recv(65536)
    _abort(played)
    settled("aborted")

    with ExitStack() as stack:  # a session holds each server; two more wait, then leave: one closes, one aborts
        holders = [stack.enter_context(connect(url)) for _ in range(2)]
        for holder in holders:
            holder.send(reset)
            assert json.loads(holder.recv(timeout=60))["type"] == "observation"
        waiting = [_raw_session(envhub.port, endpoint["id"]) for _ in range(2)]
        wait_until(lambda: envhub.endpoint(endpoint["id"])["pool"]["waiting"] == 2, timeout_s=10)
        waiting[0].close()
        _abort(waiting[1])
        wait_until(lambda: envhub.endpoint(endpoint["id"])["pool"]["waiting"] == 0, timeout_s=2)
    settled("abandoned while queued")

    for suite in ("protocol", "quality"):
        filed = envhub.http.post("/api/checks", json={"endpoint": endpoint["id"], "suite": suite}, timeout=120)
        assert filed.status_code == 201, filed.text
        settled(suite)

    with connect(url) as ws:  # its replica dies mid-session
        ws.send(reset)
        assert json.loads(ws.recv(timeout=30))["type"] == "observation"
        replica = next(r for r in envhub.endpoint(endpoint["id"])["pool"]["replicas"] if r["sessions"] == 1)
        os.killpg(endpoint_pid(replica["id"]), signal.SIGKILL)
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=30)
    wait_until(lambda: sessions(envhub, endpoint) == 0, timeout_s=2)
    wait_until(lambda: len(envhub.ready_replicas(endpoint["id"])) >= 1, timeout_s=60)
    served_at_once(endpoint)
