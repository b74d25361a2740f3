"""Slots under attack: clients that open sessions to hold an endpoint's slots rather than to play, through the MCP
door (`/endpoints/{id}/mcp`) and `/ws`, over the real wire.

A session that has done nothing since it opened is no load that grows a pool; one client (an address here: the
tests' clients bind to addresses of their own on loopback) holds only so many sessions on a public endpoint, /ws
and MCP alike; a door session nobody calls gives its slot back and takes one again at its next call, saying its
episode was lost; and a quiet /ws session gives its slot to a session waiting for one.
"""

import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from app.settings import Settings
from tests.conftest import wait_until
from tests.fakehub import FakeHub
from tests.serving import Envhub
from tests.signin import oauth_settings

ATTACKER, OWNER = "127.0.0.2", "127.0.0.3"
CAPACITY_ERROR = -32000  # JSON-RPC's server error, which a capacity refusal is
IDLE_CLOSE = 4000  # the close code of a /ws session that gave its slot to a waiting one


@pytest.fixture
def envhubs(settings: Settings, tmp_path: Path, count_template: str) -> Iterator[Callable[..., Envhub]]:
    """envhub with the count template and the given settings; a session waits up to 30 s for a slot."""
    started: list[Envhub] = []

    def start(**update: Any) -> Envhub:
        configured = settings.model_copy(update={"data_dir": tmp_path / "data", "pool_queue_s": 30, **update})
        started.append(Envhub(configured))
        return started[-1]

    yield start
    for envhub in started:
        envhub.stop()


def mcp_client(envhub: Envhub, address: str) -> httpx.Client:
    """An HTTP client whose requests come from `address`."""
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=envhub.url, transport=transport, timeout=20)


def rpc(http: httpx.Client, endpoint: dict[str, Any], method: str, params: Any, session: str | None = None) -> Any:
    headers = {"accept": "application/json, text/event-stream"} | ({"mcp-session-id": session} if session else {})
    call = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = http.post(f"/endpoints/{endpoint['id']}/mcp", json=call, headers=headers)
    assert answer.status_code == 200, answer.text
    return answer


def initialize(envhub: Envhub, endpoint: dict[str, Any], address: str) -> tuple[str | None, dict[str, Any]]:
    """An MCP session made from `address`: its id (None when refused) and the answer."""
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "squatter", "version": "1"}}
    with mcp_client(envhub, address) as http:
        answer = rpc(http, endpoint, "initialize", params)
    return answer.headers.get("mcp-session-id"), answer.json()


def call_tool(http: httpx.Client, endpoint: dict[str, Any], session: str, name: str, arguments: Any) -> Any:
    answer = rpc(http, endpoint, "tools/call", {"name": name, "arguments": arguments}, session).json()
    assert "result" in answer, answer
    return answer["result"]


def ws(envhub: Envhub, endpoint: dict[str, Any], address: str) -> ClientConnection:
    url = f"ws://127.0.0.1:{envhub.port}/endpoints/{endpoint['id']}/ws"
    return connect(url, source_address=(address, 0), open_timeout=10)


def play(socket: ClientConnection, timeout_s: float = 20) -> dict[str, Any]:
    socket.send('{"type": "reset", "data": {}}')
    answer: dict[str, Any] = json.loads(socket.recv(timeout=timeout_s))
    return answer


def pool(envhub: Envhub, endpoint: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = envhub.endpoint(endpoint["id"])["pool"]
    return found


def test_anonymous_initializes_neither_grow_a_pool_nor_hold_more_of_it_than_one_clients_share(
    envhubs: Callable[..., Envhub],
) -> None:
    """Four anonymous initializes used to grow a pool of one replica to four, every slot theirs: each was load."""
    envhub = envhubs(pool_sessions_per_client=2)
    endpoint = envhub.running(
        "template:count", options={"env": {"MAX_CONCURRENT_ENVS": "2"}, "replicas": {"min": 1, "max": 4}}
    )
    with ThreadPoolExecutor(4) as attack:
        answers = list(attack.map(lambda _: initialize(envhub, endpoint, ATTACKER), range(4)))
    held = [answer for session, answer in answers if session is not None]
    refused = [answer["error"] for session, answer in answers if session is None]
    assert len(held) == 2, answers  # the client's share; the others refused at once (a wait would be 30 s)
    assert [(e["code"], e["data"]["limit"], e["data"]["max_sessions"]) for e in refused] == [
        (CAPACITY_ERROR, "sessions_per_client", 2)
    ] * 2
    assert (pool(envhub, endpoint)["sessions"], len(pool(envhub, endpoint)["replicas"])) == (2, 1)
    # The owner's session plays: the pool grows for its work, by the one replica it needs.
    with ws(envhub, endpoint, OWNER) as owner:
        assert play(owner, timeout_s=25)["type"] == "observation"
    assert len(pool(envhub, endpoint)["replicas"]) == 2


def test_sessions_made_over_http_and_left_idle_do_not_grow_a_pool(envhubs: Callable[..., Envhub]) -> None:
    """openenv's own MCP sessions (`openenv/session/create` over POST /mcp) used to count as load once made: a few
    anonymous creates grew the pool. Made and left idle they hold their slots only; a call makes one load."""
    envhub = envhubs()
    endpoint = envhub.running(
        "template:count", options={"env": {"MAX_CONCURRENT_ENVS": "2"}, "replicas": {"min": 1, "max": 4}}
    )
    made = []
    with mcp_client(envhub, ATTACKER) as http:
        for _ in range(2):
            answer = http.post(
                f"/endpoints/{endpoint['id']}/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}},
            ).json()
            made.append(answer["result"]["session_id"])
    assert pool(envhub, endpoint)["sessions"] == 2
    # Growth is asked for within a second of sessions pressing on the pool; none does.
    with pytest.raises(pytest.fail.Exception):
        wait_until(lambda: len(pool(envhub, endpoint)["replicas"]) > 1, timeout_s=3)
    with mcp_client(envhub, OWNER) as http:  # both now work: the pool, full of load, grows
        for session_id in made:
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"session_id": session_id}}
            assert http.post(f"/endpoints/{endpoint['id']}/mcp", json=call).status_code == 200
    wait_until(lambda: len(pool(envhub, endpoint)["replicas"]) > 1, timeout_s=30)


def test_one_client_holds_at_most_its_share_of_an_endpoint_over_ws_and_mcp_together(
    envhubs: Callable[..., Envhub],
) -> None:
    envhub = envhubs(pool_sessions_per_client=2)
    endpoint = envhub.running("template:count", options={"env": {"MAX_CONCURRENT_ENVS": "8"}})
    session, _ = initialize(envhub, endpoint, ATTACKER)
    assert session is not None
    with ws(envhub, endpoint, ATTACKER) as first:
        assert play(first)["type"] == "observation"
        with ws(envhub, endpoint, ATTACKER) as third:
            refusal = json.loads(third.recv(timeout=10))  # at once: the wait would be 30 s
        assert refusal["type"] == "error", refusal
        assert (refusal["data"]["code"], refusal["data"]["limit"]) == ("CAPACITY_REACHED", "sessions_per_client")
        assert initialize(envhub, endpoint, ATTACKER)[0] is None
        with ws(envhub, endpoint, OWNER) as other:  # another client is served
            assert play(other)["type"] == "observation"
    wait_until(lambda: pool(envhub, endpoint)["sessions"] == 1)
    with ws(envhub, endpoint, ATTACKER) as again:  # a session it closed counts no more
        assert play(again)["type"] == "observation"


def test_the_owner_sending_the_endpoints_own_token_holds_all_of_its_public_endpoint(
    settings: Settings, hub: FakeHub, tmp_path: Path, count_template: str
) -> None:
    """A trainer holds its batch for a whole run: on the owner's own public endpoint, the per-client cap is no cap
    when the sessions carry the endpoint's token, and everyone else is still held to it."""
    hub.users = {"hf_victim": "victim"}
    configured = oauth_settings(settings, data_dir=tmp_path / "data", pool_sessions_per_client=1, pool_queue_s=30)
    envhub = Envhub(configured)
    try:
        victim = {"Authorization": "Bearer hf_victim"}
        launched = envhub.http.post(
            "/api/endpoints",
            json={"environment": "template:count", "options": {"env": {"MAX_CONCURRENT_ENVS": "3"}}},
            headers=victim,
        )
        assert launched.status_code == 201, launched.text
        endpoint = envhub.wait_status(launched.json()["id"], "running")
        token = envhub.http.get(f"/api/endpoints/{endpoint['id']}", headers=victim).json()["access_token"]
        assert envhub.http.get(f"/api/endpoints/{endpoint['id']}").json()["access_token"] is None  # hers alone
        url = f"ws://127.0.0.1:{envhub.port}/endpoints/{endpoint['id']}/ws"
        bearer = {"Authorization": f"Bearer {token}"}
        with ExitStack() as held:
            owned = [
                held.enter_context(connect(url, source_address=(OWNER, 0), additional_headers=bearer)) for _ in "ab"
            ]
            assert [play(socket)["type"] for socket in owned] == ["observation"] * 2
            with ws(envhub, endpoint, ATTACKER) as first:
                assert play(first)["type"] == "observation"
                with ws(envhub, endpoint, ATTACKER) as second:
                    refusal = json.loads(second.recv(timeout=10))
                assert (refusal["data"]["code"], refusal["data"]["limit"]) == (
                    "CAPACITY_REACHED",
                    "sessions_per_client",
                )
    finally:
        envhub.end_endpoints()
        envhub.stop()


def test_an_idle_door_session_gives_its_slot_back_and_its_next_call_takes_one_again(
    envhubs: Callable[..., Envhub],
) -> None:
    envhub = envhubs(mcp_slot_idle_s=1)
    endpoint = envhub.running("template:count", options={"env": {"MAX_CONCURRENT_ENVS": "1"}})
    session, _ = initialize(envhub, endpoint, ATTACKER)
    assert session is not None
    with mcp_client(envhub, ATTACKER) as http:
        call_tool(http, endpoint, session, "reset", {})
        assert call_tool(http, endpoint, session, "step", {"add": 3})["structuredContent"]["done"] is False
        wait_until(lambda: pool(envhub, endpoint)["sessions"] == 0)  # the slot came back
        with ws(envhub, endpoint, OWNER) as other:  # and someone else plays on it at once
            assert play(other, timeout_s=10)["type"] == "observation"
        wait_until(lambda: pool(envhub, endpoint)["sessions"] == 0)
        lost = call_tool(http, endpoint, session, "step", {"add": 3})
        assert lost["isError"] is True and lost["structuredContent"]["observation"]["code"] == "episode_lost"
        assert pool(envhub, endpoint)["sessions"] == 1  # the call took a slot again
        call_tool(http, endpoint, session, "reset", {})
        done = call_tool(http, endpoint, session, "step", {"add": 10})
        assert done["structuredContent"]["done"] is True and done["structuredContent"]["reward"] == 1.0


def test_an_idle_ws_session_on_a_one_slot_endpoint_yields_to_a_waiting_client(envhubs: Callable[..., Envhub]) -> None:
    envhub = envhubs(ws_idle_s=1, ws_ping_s=0.5)
    endpoint = envhub.running("template:count", options={"env": {"MAX_CONCURRENT_ENVS": "1"}})
    with ws(envhub, endpoint, ATTACKER) as idle:
        assert play(idle)["type"] == "observation"  # then quiet, answering pings
        with ws(envhub, endpoint, OWNER) as waiting:
            assert play(waiting, timeout_s=20)["type"] == "observation"  # well within its 30 s wait
        with pytest.raises(ConnectionClosed) as closed:
            idle.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == IDLE_CLOSE


def test_an_idle_door_session_whose_slot_was_taken_says_so_by_its_code(envhubs: Callable[..., Envhub]) -> None:
    envhub = envhubs(mcp_slot_idle_s=1, pool_queue_s=1)
    endpoint = envhub.running("template:count", options={"env": {"MAX_CONCURRENT_ENVS": "1"}})
    session, _ = initialize(envhub, endpoint, ATTACKER)
    assert session is not None
    with mcp_client(envhub, ATTACKER) as http:
        call_tool(http, endpoint, session, "reset", {})
        wait_until(lambda: pool(envhub, endpoint)["sessions"] == 0)
        with ws(envhub, endpoint, OWNER) as other:  # the one slot is someone else's now
            assert play(other)["type"] == "observation"
            waited = call_tool(http, endpoint, session, "step", {"add": 3})
            assert waited["isError"] is True and waited["structuredContent"]["observation"]["code"] == "no_slot"
        wait_until(lambda: pool(envhub, endpoint)["sessions"] == 0)
        call_tool(http, endpoint, session, "reset", {})  # once it is free again, the session plays on
        assert call_tool(http, endpoint, session, "step", {"add": 10})["structuredContent"]["done"] is True
