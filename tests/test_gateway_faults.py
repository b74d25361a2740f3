"""Faults a review suspected in the gateway, each tried against a server that provokes it.

Refused attempts must not leave sessions counted; a flood of failures must not start a thread each; a POST that
may have reached its server must not be sent twice, and a server's 500 is not followed by a 502 of the gateway's;
a step's latency is its own reply's; a replica that refuses the WebSocket upgrade says so; and a session waiting
for a slot outlives its client's keepalive.
"""

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from app.settings import Settings
from tests.conftest import wait_until
from tests.environments import write_count_env, write_echo_env
from tests.fakehub import FakeHub
from tests.redteam.hostile import write_hostile_env
from tests.serving import Envhub, free_port


@pytest.fixture
def envhub(settings: Settings, tmp_path: Path, templates_dir: Path) -> Iterator[Envhub]:
    write_count_env(templates_dir / "count")
    write_echo_env(templates_dir / "echo")
    write_hostile_env(templates_dir / "slow_step", "slow_step")
    write_hostile_env(templates_dir / "blocking_step", "blocking_step")
    write_hostile_env(templates_dir / "fail_then_close", "fail_then_close")
    server = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "pool_queue_s": 3}))
    yield server
    server.stop()


def ws_url(envhub: Envhub, endpoint: dict[str, Any], path: str = "ws") -> str:
    return f"ws://127.0.0.1:{envhub.port}/endpoints/{endpoint['id']}/{path}"


def test_refused_attempts_leave_no_session_counted(envhub: Envhub) -> None:
    """Two servers that hold one session each without saying so: every session past the second is tried on both,
    refused by both, and refused itself; none of those attempts stays counted."""
    endpoint = envhub.running("template:count", options={"replicas": 2, "env": {"COUNT_CAP": "1"}})
    wait_until(lambda: len(envhub.ready_replicas(endpoint["id"])) == 2, timeout_s=30)
    with ExitStack() as stack:
        clients = [stack.enter_context(connect(ws_url(envhub, endpoint))) for _ in range(5)]
        answers = []
        for ws in clients:
            ws.send(json.dumps({"type": "reset", "data": {}}))
        for ws in clients:
            try:
                answers.append(json.loads(ws.recv(timeout=20))["type"])
            except ConnectionClosed:
                answers.append("closed")
        assert sorted(answers).count("observation") == 2, answers
        pool = envhub.endpoint(endpoint["id"])["pool"]
        assert pool["sessions"] == 2 and [r["sessions"] for r in pool["replicas"]] == [1, 1]
    wait_until(lambda: envhub.endpoint(endpoint["id"])["pool"]["sessions"] == 0, timeout_s=2)


class DroppingServer:
    """A Space's server that answers /health, and takes each POST whole, counts it, and closes without a word:
    it may have applied it, and the client cannot know."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.posts = 0
        self._loop = asyncio.new_event_loop()
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self._thread.start()
        started.wait(10)

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        started.set()
        self._loop.run_forever()
        server.close()
        self._loop.run_until_complete(server.wait_closed())
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                await reader.readexactly(length)
                if head.startswith(b"POST"):
                    self.posts += 1
                    writer.transport.abort()
                    return
                body = b'{"status":"healthy"}'
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


@pytest.fixture
def dropping_space(
    settings: Settings, tmp_path: Path, count_template: str, hub: FakeHub
) -> Iterator[tuple[Envhub, dict[str, Any], DroppingServer]]:
    """An endpoint on the space backend whose Space's server drops every POST: (envhub, endpoint, server)."""
    dropping = DroppingServer()
    configured = settings.model_copy(
        update={"data_dir": tmp_path / "data", "hf_token": SecretStr("hf_test"), "space_poll_s": 0.05}
    )
    envhub = Envhub(configured)
    try:
        hub.boot_sequence = ["BUILDING"]
        launched = envhub.launch("template:count", backend="space", options={"namespace": "alice"})
        wait_until(lambda: "alice/count" in {w.repo_id for w in hub.writes})
        hub.set_host("alice/count", dropping.url)
        hub.set_stage("alice/count", "RUNNING")
        endpoint = envhub.wait_status(launched["id"], "running", "failed")
        assert endpoint["status"] == "running", endpoint["message"]
        yield envhub, endpoint, dropping
    finally:
        envhub.stop()
        dropping.close()


def test_a_post_that_may_have_reached_its_server_is_not_sent_twice(
    dropping_space: tuple[Envhub, dict[str, Any], DroppingServer],
) -> None:
    envhub, endpoint, dropping = dropping_space
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "step", "arguments": {}}}
    answer = envhub.http.post(f"/endpoints/{endpoint['id']}/mcp", json=call)
    assert answer.status_code == 502
    assert dropping.posts == 1  # once: the server may have applied it


def test_a_servers_500_is_passed_on_and_the_next_request_is_answered_by_the_server(envhub: Envhub) -> None:
    """A server that fails after its 500 went out closes the connection without saying so (uvicorn does): the
    gateway used to send the client's next request on that connection and answer 502 for a server that is fine."""
    endpoint = envhub.running("template:fail_then_close")
    with httpx.Client(base_url=envhub.url, timeout=30) as client:
        for _ in range(3):  # one client connection, each request sent as soon as the last is answered
            answer = client.post(f"/endpoints/{endpoint['id']}/step", json={"action": {}})
            assert (answer.status_code, answer.content) == (500, b"boom!")


def test_a_flood_of_failures_checks_the_endpoint_once_at_a_time(
    dropping_space: tuple[Envhub, dict[str, Any], DroppingServer],
) -> None:
    """Each request that finds its replica broken asks for the endpoint to be looked at: one look at a time."""
    envhub, endpoint, _ = dropping_space
    most, stop = [0], threading.Event()

    def watch() -> None:
        while not stop.is_set():
            checking = [t for t in threading.enumerate() if "_check" in t.name or t.name.startswith("check-")]
            most[0] = max(most[0], len(checking))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()

    async def flood() -> list[int]:
        async with httpx.AsyncClient(base_url=envhub.url, timeout=30) as client:
            answers = await asyncio.gather(
                *(client.post(f"/endpoints/{endpoint['id']}/step", json={}) for _ in range(60))
            )
        return [a.status_code for a in answers]

    try:
        statuses = asyncio.run(flood())
    finally:
        stop.set()
        watcher.join()
    assert set(statuses) == {502}
    assert most[0] <= 1, f"{most[0]} threads checked the endpoint at once"


def test_a_steps_latency_is_its_own_replys(envhub: Envhub) -> None:
    """A client that sends a state and a step at once: the state is answered at once, the step after 0.5 s. The
    step's latency is the time to its own reply, not to the first reply that comes back."""
    endpoint = envhub.running("template:slow_step")
    with connect(ws_url(envhub, endpoint)) as ws:
        ws.send(json.dumps({"type": "state"}))
        ws.send(json.dumps({"type": "step", "data": {}}))
        ws.recv(timeout=10)
        ws.recv(timeout=10)
    stats = envhub.endpoint(endpoint["id"])["stats"]
    assert stats["steps"] == 1
    assert stats["step_p50_ms"] >= 400  # at least the server's own half second, however loaded the machine


def test_a_replica_without_a_websocket_route_is_named_as_refusing(envhub: Envhub) -> None:
    endpoint = envhub.running("template:echo")
    with pytest.raises(ConnectionClosed) as closed, connect(ws_url(envhub, endpoint)) as ws:
        ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
    assert closed.value.rcvd.reason == "the environment's server refused the WebSocket (HTTP 403): it serves no /ws"


def test_a_waiting_session_outlives_its_clients_keepalive(
    settings: Settings, tmp_path: Path, count_template: str
) -> None:
    """A `websockets` client pings (by default every 20 s) and gives up when no pong comes (20 s later): waiting
    longer than that for a slot, it is kept alive by envhub, then served when a slot frees, or told the pool is
    full, never timed out. Here the clients ping every second and wait a second for the pong."""
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "pool_queue_s": 10}))
    try:
        freed = envhub.running("template:count", options={"env": {"MAX_CONCURRENT_ENVS": "1"}})
        kept = envhub.running("template:count", options={"env": {"MAX_CONCURRENT_ENVS": "1"}})
        reset = json.dumps({"type": "reset", "data": {}})
        with connect(ws_url(envhub, freed)) as holder, connect(ws_url(envhub, kept)) as keeper:
            for ws in (holder, keeper):
                ws.send(reset)
                ws.recv(timeout=10)
            outcomes: dict[str, Any] = {}

            def wait(name: str, endpoint: dict[str, Any]) -> None:
                with connect(ws_url(envhub, endpoint), ping_interval=1, ping_timeout=1) as ws:
                    ws.send(reset)
                    try:
                        outcomes[name] = json.loads(ws.recv(timeout=30))
                    except ConnectionClosed as exc:
                        outcomes[name] = exc

            waiters = [threading.Thread(target=wait, args=(n, e)) for n, e in (("served", freed), ("refused", kept))]
            for waiter in waiters:
                waiter.start()
            started = time.monotonic()
            while time.monotonic() - started < 6:  # past several of the clients' keepalive deadlines (about 2 s)
                assert not outcomes, outcomes
                time.sleep(0.5)
            holder.close()
            for waiter in waiters:
                waiter.join(60)
        assert outcomes["served"]["type"] == "observation", outcomes
        refused = outcomes["refused"]
        assert refused["type"] == "error" and refused["data"]["code"] == "CAPACITY_REACHED", refused
        assert refused["data"]["limit"] == "queue_s"  # envhub's pool refused it, after its wait
    finally:
        envhub.stop()


def test_a_replica_busy_thinking_is_not_taken_for_hung(envhub: Envhub) -> None:
    """A server whose steps block it for seconds (a chess engine's) misses its /health deadlines while it answers
    its session: it is busy, not hung, and keeps its session."""
    endpoint = envhub.running("template:blocking_step")
    with connect(ws_url(envhub, endpoint)) as ws:
        for _ in range(4):  # 12 s of a server that answers nothing else: six missed deadlines
            ws.send(json.dumps({"type": "step", "data": {}}))
            assert json.loads(ws.recv(timeout=30))["type"] == "step"
    pool = envhub.endpoint(endpoint["id"])["pool"]
    assert [r["id"] for r in pool["replicas"]] == [endpoint["id"]]
    assert "lost" not in {e["kind"] for e in pool["events"]}
