"""A replica's slots come back: after envhub's own checks, after clients that leave at the worst moment, and after
MCP sessions nobody closes, a pool's session count returns to 0 and the next session is served at once."""

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient
from websockets.sync.client import connect

from app.settings import Settings
from tests.conftest import wait_until
from tests.serving import Envhub

ONE_SLOT = {"env": {"MAX_CONCURRENT_ENVS": "1"}}
CREATE = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}


@pytest.fixture
def envhub(settings: Settings, tmp_path: Path, count_template: str) -> Iterator[Envhub]:
    server = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data", "mcp_session_idle_s": 2}))
    yield server
    server.stop()


def sessions(envhub: Envhub, endpoint: dict[str, Any]) -> int:
    count: int = envhub.endpoint(endpoint["id"])["pool"]["sessions"]
    return count


def served_at_once(endpoint: dict[str, Any]) -> None:
    """A new session gets its reset answered without waiting for a slot."""
    with GenericEnvClient(base_url=endpoint["url"], connect_timeout_s=5, message_timeout_s=5).sync() as env:
        assert env.reset().observation is not None


@pytest.mark.parametrize("suite", ["protocol", "quality"])
def test_envhubs_own_checks_give_the_only_slot_back(envhub: Envhub, suite: str) -> None:
    endpoint = envhub.running("template:count", options=ONE_SLOT)
    filed = envhub.http.post("/api/checks", json={"endpoint": endpoint["id"], "suite": suite}, timeout=120)
    assert filed.status_code == 201, filed.text
    # A pool that holds one session queues a second rather than refusing it: the checks that need two say so.
    assert filed.json()["verdict"] in ("pass", "warn"), filed.json()
    wait_until(lambda: sessions(envhub, endpoint) == 0, timeout_s=2)
    served_at_once(endpoint)


@pytest.mark.parametrize("suite", ["protocol", "quality"])
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
        results = {c["id"]: c for c in report["checks"]}
        broken = {i: c["message"] for i, c in results.items() if c["result"] in ("fail", "error")}
        assert not broken, broken
        for skipped in ("22", "23"):
            assert results[skipped]["result"] == "skip"
            assert "each of the endpoint's servers holds one session" in results[skipped]["message"]
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
