"""No SQL runs on envhub's event loop while the gateway carries traffic: every read the data plane needs is made
off it (hosting.pool_cache.PoolCache), so a slow database never stalls the sessions being relayed."""

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from openenv.core.generic_client import GenericEnvClient
from websockets.sync.client import connect

from app.settings import Settings
from tests.serving import Envhub


@pytest.fixture
def watched(settings: Settings, tmp_path: Any, count_template: str) -> Iterator[tuple[Envhub, list[tuple[str, Any]]]]:
    """envhub, and the SQL statements run on its event loop's thread from the moment the fixture yields."""
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data"}))
    try:
        envhub.running("template:count", options={"replicas": {"min": 1, "max": 2}})
        with envhub.sql_on_the_loop() as on_the_loop:
            yield envhub, on_the_loop
    finally:
        envhub.stop()


def test_the_gateways_traffic_runs_no_sql_on_the_event_loop(watched: tuple[Envhub, list[tuple[str, Any]]]) -> None:
    envhub, on_the_loop = watched
    endpoint = envhub.endpoint(envhub.http.get("/api/endpoints").json()["data"][0]["id"])
    base = endpoint["url"]
    for _ in range(3):  # past the routes' cache, so that reads happen
        assert httpx.get(f"{base}/health", timeout=10).status_code == 200
        with GenericEnvClient(base_url=base).sync() as env:
            env.reset()
            env.step({"add": 3})
        with connect(f"{base.replace('http', 'ws', 1)}/ws") as ws:
            ws.send(json.dumps({"type": "reset", "data": {}}))
            ws.recv(timeout=10)
        create = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}
        made = httpx.post(f"{base}/mcp", json=create, timeout=10).json()["result"]["session_id"]
        close = {"jsonrpc": "2.0", "id": 2, "method": "openenv/session/close", "params": {"session_id": made}}
        httpx.post(f"{base}/mcp", json=close, timeout=10)
        assert httpx.get(f"{envhub.url}/endpoints/{'0' * 10}/health", timeout=10).status_code == 404
    assert on_the_loop == []

    async def agent() -> None:
        async with (
            httpx.AsyncClient(timeout=60) as http,
            streamable_http_client(f"{base}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = await session.list_tools()
            assert {t.name for t in tools.tools} >= {"reset", "step"}
            await session.call_tool("reset", {})
            await session.call_tool("step", {"add": 10})

    asyncio.run(agent())
    assert on_the_loop == []
