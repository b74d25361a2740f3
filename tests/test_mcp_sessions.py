"""MCP sessions hold their slots as `/ws` sessions do: a pool of replicas behind one MCP URL, capacity refusals
moved to another replica unseen, a full pool refused with its numbers, idle sessions closed, and a private
endpoint's MCP door answering only its owner. Driven with the official `mcp` SDK's client."""

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import McpError
from mcp.types import ErrorData

from app.settings import Settings
from protocol.frames import RPC_SERVER_ERROR
from tests.conftest import wait_until
from tests.fakehub import FakeHub
from tests.mcpclients import mcp, refusal
from tests.serving import Envhub
from tests.signin import oauth_settings


@pytest.fixture
def pools(settings: Settings, tmp_path: Path, count_template: str) -> Iterator[Envhub]:
    """envhub whose sessions wait 3 s for a slot."""
    server = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "pool_queue_s": 3}))
    yield server
    server.stop()


@pytest.fixture
def forgetful(settings: Settings, tmp_path: Path, count_template: str) -> Iterator[Envhub]:
    """envhub whose MCP sessions are closed after 1 s without a call."""
    server = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "mcp_session_idle_s": 1}))
    yield server
    server.stop()


async def count_to_ten(session: ClientSession) -> float | None:
    """One episode of the count environment through the generated tools: reset, then add 10."""
    await session.call_tool("reset", {})
    done = await session.call_tool("step", {"add": 10})
    assert done.structuredContent is not None and done.structuredContent["done"] is True, done.content
    reward: float | None = done.structuredContent["reward"]
    return reward


def sessions_per_replica(envhub: Envhub, endpoint_id: str) -> dict[str, int]:
    return {r["id"]: r["sessions"] for r in envhub.endpoint(endpoint_id)["pool"]["replicas"] if r["status"] == "ready"}


def test_a_pool_of_four_holds_sixteen_mcp_sessions_at_once_and_refuses_the_seventeenth(pools: Envhub) -> None:
    # Four servers of 4 sessions that never told envhub so: the pool learns it from their refusals.
    endpoint = pools.running("template:count", options={"replicas": 4, "env": {"COUNT_CAP": "4"}})
    wait_until(lambda: len(pools.ready_replicas(endpoint["id"])) == 4, timeout_s=60)
    url = endpoint["url"]

    async def load() -> tuple[list[float | None], dict[str, int], ErrorData]:
        played, release = asyncio.Semaphore(0), asyncio.Event()

        async def agent() -> float | None:  # holds its session mid-episode until every agent has played
            async with mcp(url) as session:
                await session.call_tool("reset", {})
                await session.call_tool("step", {"add": 3})
                played.release()
                await release.wait()
                done = await session.call_tool("step", {"add": 7})
                assert done.structuredContent is not None and done.structuredContent["done"] is True
                reward: float | None = done.structuredContent["reward"]
                return reward

        agents = [asyncio.ensure_future(agent()) for _ in range(16)]
        for _ in agents:
            await played.acquire()
        held = await asyncio.to_thread(sessions_per_replica, pools, endpoint["id"])
        full = await refusal(url)  # each server refuses it in turn, and no slot frees within 3 s
        release.set()
        return list(await asyncio.gather(*agents)), held, full

    rewards, held, full = asyncio.run(load())
    assert rewards == [1.0] * 16
    assert sorted(held.values()) == [4, 4, 4, 4]
    replicas = pools.endpoint(endpoint["id"])["pool"]["replicas"]
    assert {(r["capacity"], r["capacity_said"]) for r in replicas} == {(4, True)}  # learned from their refusals
    assert full.code == RPC_SERVER_ERROR and full.data is not None
    assert {k: full.data[k] for k in ("limit", "active_sessions", "max_sessions", "replicas", "waited_s")} == {
        "limit": "queue_s",
        "active_sessions": 16,
        "max_sessions": 16,
        "replicas": 4,
        "waited_s": 3,
    }
    wait_until(lambda: pools.endpoint(endpoint["id"])["pool"]["sessions"] == 0, timeout_s=20)
    listed = pools.http.get(f"/api/endpoints/{endpoint['id']}/sessions").json()["data"]
    assert len(listed) == 16 and {s["reward"] for s in listed} == {1.0} and {s["status"] for s in listed} == {"ended"}


def test_an_idle_mcp_session_is_closed_and_its_slot_freed(forgetful: Envhub) -> None:
    endpoint = forgetful.running("template:count", options={"env": {"MAX_CONCURRENT_ENVS": "1"}})
    url = endpoint["url"]

    async def idle() -> int:
        async with mcp(url) as session:
            await session.call_tool("reset", {})
            await session.call_tool("step", {"add": 3})
            await asyncio.to_thread(wait_until, lambda: forgetful.endpoint(endpoint["id"])["pool"]["sessions"] == 0, 20)
            with pytest.raises(McpError) as ended:
                await session.call_tool("step", {"add": 3})
            async with mcp(url) as again:  # the one slot is free for the next session
                assert await count_to_ten(again) == 1.0
            return ended.value.error.code

    # envhub answers 404 (session_unknown); the SDK's client turns any 404 into its own "session terminated" error
    assert asyncio.run(idle()) == 32600
    [later, closed] = forgetful.http.get(f"/api/endpoints/{endpoint['id']}/sessions").json()["data"]
    assert (closed["status"], closed["code"]) == ("ended", "idle")
    episode = forgetful.http.get(f"/api/endpoints/{endpoint['id']}/sessions/{closed['id']}").json()["episodes"][0]
    assert (episode["status"], episode["code"], episode["steps"]) == ("cut", "idle", 1)
    assert later["reward"] == 1.0


VICTIM = {"Authorization": "Bearer hf_victim"}
MALLORY = {"Authorization": "Bearer hf_mallory"}


@pytest.fixture
def public_envhub(settings: Settings, hub: FakeHub, tmp_path: Path, count_template: str) -> Iterator[Envhub]:
    """envhub with sign-in, as a public deployment runs it."""
    hub.users |= {"hf_victim": "victim", "hf_mallory": "mallory"}
    envhub = Envhub(oauth_settings(settings, data_dir=tmp_path / "data", anonymous_launch=False))
    yield envhub
    envhub.stop()


def test_a_private_endpoints_mcp_door_and_sessions_are_its_owners(public_envhub: Envhub) -> None:
    launched = public_envhub.http.post(
        "/api/endpoints", json={"environment": "template:count", "options": {"private": True}}, headers=VICTIM
    )
    assert launched.status_code == 201, launched.text
    endpoint_id = launched.json()["id"]
    wait_until(
        lambda: public_envhub.http.get(f"/api/endpoints/{endpoint_id}", headers=VICTIM).json()["status"] == "running",
        timeout_s=90,
    )
    endpoint: dict[str, Any] = public_envhub.http.get(f"/api/endpoints/{endpoint_id}", headers=VICTIM).json()
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}},
    }
    mcp_url = f"{endpoint['url']}/mcp"
    anonymous = httpx.post(mcp_url, json=initialize, headers={"accept": "application/json"}, timeout=30)
    assert (anonymous.status_code, anonymous.json()["code"]) == (401, "bearer_required")
    strangers = httpx.post(mcp_url, json=initialize, headers={"accept": "application/json"} | MALLORY, timeout=30)
    assert strangers.status_code == 403

    async def play() -> float | None:
        async with mcp(endpoint["url"], {"Authorization": f"Bearer {endpoint['access_token']}"}) as session:
            return await count_to_ten(session)

    assert asyncio.run(play()) == 1.0
    sessions = f"/api/endpoints/{endpoint_id}/sessions"
    assert public_envhub.http.get(sessions, headers=MALLORY).status_code == 404
    assert public_envhub.http.get(sessions).status_code == 404
    [recorded] = public_envhub.http.get(sessions, headers=VICTIM).json()["data"]
    assert recorded["owner"] == "victim" and recorded["reward"] == 1.0
    assert public_envhub.http.get(f"{sessions}/{recorded['id']}", headers=MALLORY).status_code == 404
    # Its episodes' share links open for its owner only: a stranger given the id learns nothing.
    [episode] = public_envhub.http.get(f"{sessions}/{recorded['id']}", headers=VICTIM).json()["episodes"]
    shared = f"/api/evaluations/episodes/{episode['id']}"
    assert public_envhub.http.get(shared, headers=VICTIM).json()["reward"] == 1.0
    for stranger in (MALLORY, {}):
        hidden = public_envhub.http.get(shared, headers=stranger)
        assert (hidden.status_code, hidden.json()["code"]) == (404, "not_found")
