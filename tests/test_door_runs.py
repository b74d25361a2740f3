"""The MCP door as agent harnesses use it: they never end their sessions, so a session whose episode is done gives
its slot back at once; a session initialized with a run credential (X-Envhub-Run) is joined to its agent run (the
run id kept, never the credential), and ending the run ends its sessions."""

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.mcpclients import mcp, structured
from tests.serving import Envhub

ONE_SLOT = {"env": {"MAX_CONCURRENT_ENVS": "1"}}
SECRET = "Zq9-secret-of-the-run"
CREDENTIAL = f"envhub-run.ar-0123456789ab.{SECRET}"


@pytest.fixture
def envhub(settings: Settings, tmp_path: Path, count_template: str) -> Iterator[Envhub]:
    """envhub whose door sessions keep their slots for 10 minutes when nobody calls them (only an episode's end can
    free one sooner), and whose sessions wait 5 s at most for a slot."""
    server = Envhub(
        settings.model_copy(update={"data_dir": tmp_path / "data", "mcp_slot_idle_s": 600, "pool_queue_s": 5})
    )
    yield server
    server.stop()


def held(envhub: Envhub, endpoint: dict[str, Any]) -> int:
    sessions: int = envhub.endpoint(endpoint["id"])["pool"]["sessions"]
    return sessions


def test_twenty_harness_sessions_left_open_in_a_row_on_a_one_slot_server_are_each_served(envhub: Envhub) -> None:
    endpoint = envhub.running("template:count", options=ONE_SLOT)

    async def harness_run() -> float | None:
        """One episode played to its end, the session then abandoned without DELETE, as Claude Code does."""
        async with mcp(endpoint["url"], close=False) as session:
            await session.call_tool("reset", {})
            done = structured(await session.call_tool("step", {"add": 10}))
            assert done["done"] is True
            reward: float | None = done["reward"]
            return reward

    async def runs() -> list[float | None]:
        return [await harness_run() for _ in range(20)]  # each waits in no queue: the slot came back at done

    assert asyncio.run(runs()) == [1.0] * 20
    assert held(envhub, endpoint) == 0
    listed = envhub.http.get(f"/api/endpoints/{endpoint['id']}/sessions").json()
    assert listed["count"] == 20 and all(s["episode_count"] == 1 for s in listed["data"])


def test_a_done_sessions_next_step_is_refused_without_a_slot_and_its_reset_takes_one_again(envhub: Envhub) -> None:
    endpoint = envhub.running("template:count", options=ONE_SLOT)

    async def play() -> None:
        async with mcp(endpoint["url"], close=False) as session:
            await session.call_tool("reset", {})
            assert structured(await session.call_tool("step", {"add": 10}))["done"] is True
            assert held(envhub, endpoint) == 0
            over = await session.call_tool("step", {"add": 1})
            assert over.isError is True and structured(over)["done"] is True
            assert held(envhub, endpoint) == 0
            await session.call_tool("reset", {})
            assert held(envhub, endpoint) == 1
            assert structured(await session.call_tool("step", {"add": 10}))["reward"] == 1.0

    asyncio.run(play())
    assert held(envhub, endpoint) == 0


def test_a_session_initialized_with_a_run_credential_keeps_the_run_id_and_never_the_secret(envhub: Envhub) -> None:
    endpoint = envhub.running("template:count", options=ONE_SLOT)
    headers = {"X-Envhub-Run": CREDENTIAL, "X-Claude-Code-Session-Id": "cc-7f3a"}

    async def play() -> None:
        async with mcp(endpoint["url"], headers) as session:
            await session.call_tool("reset", {})

    asyncio.run(play())
    listed = envhub.http.get(f"/api/endpoints/{endpoint['id']}/sessions")
    session_id = listed.json()["data"][0]["id"]
    read = envhub.http.get(f"/api/endpoints/{endpoint['id']}/sessions/{session_id}")
    assert read.status_code == 200
    assert (read.json()["run"], read.json()["client_session"]) == ("ar-0123456789ab", "cc-7f3a")
    for answer in (listed, read):
        assert SECRET not in answer.text
    for export in ("episodes.jsonl", "messages.jsonl"):
        assert SECRET not in envhub.http.get(f"/api/endpoints/{endpoint['id']}/sessions/{session_id}/{export}").text


def rpc(http: httpx.Client, path: str, method: str, params: Any, headers: dict[str, str]) -> httpx.Response:
    call = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return http.post(path, json=call, headers={"accept": "application/json, text/event-stream"} | headers)


def test_ending_a_run_ends_its_door_sessions_and_gives_their_slots_back(envhub: Envhub) -> None:
    endpoint = envhub.running("template:count", options={"env": {"MAX_CONCURRENT_ENVS": "2"}})
    path = f"/endpoints/{endpoint['id']}/mcp"
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "harness", "version": "1"}}
    other = "envhub-run.ar-00000000beef.another"
    with httpx.Client(base_url=envhub.url, timeout=30) as http:
        opened = {}
        for credential in (CREDENTIAL, other):
            answer = rpc(http, path, "initialize", hello, {"x-envhub-run": credential})
            opened[credential] = answer.headers["mcp-session-id"]
            stepped = {"name": "reset", "arguments": {}}
            assert "result" in rpc(http, path, "tools/call", stepped, {"mcp-session-id": opened[credential]}).json()
        assert held(envhub, endpoint) == 2
        assert envhub.on_loop(envhub.services.mcp.end_run("ar-0123456789ab")) == 1
        assert held(envhub, endpoint) == 1  # the other run's session plays on
        ended = rpc(
            http, path, "tools/call", {"name": "state", "arguments": {}}, {"mcp-session-id": opened[CREDENTIAL]}
        )
        assert ended.status_code == 404
        going = rpc(http, path, "tools/call", {"name": "state", "arguments": {}}, {"mcp-session-id": opened[other]})
        assert "result" in going.json()
    sessions = envhub.http.get(f"/api/endpoints/{endpoint['id']}/sessions").json()["data"]
    mine = next(s for s in sessions if s["run"] == "ar-0123456789ab")
    assert mine["status"] == "ended"
    record = envhub.http.get(f"/api/endpoints/{endpoint['id']}/sessions/{mine['id']}").json()
    assert len(record["episodes"]) == 1  # its episode is kept
