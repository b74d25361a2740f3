"""envhub's background quality reports never compete with an endpoint's clients for a slot: a report's sessions on
a replica count in its pool, and give way as soon as a client's session waits."""

import asyncio
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import websockets

from app.settings import Settings
from tests.conftest import wait_until
from tests.serving import Envhub

SLOTS = 64


def gave_way(envhub: Envhub, endpoint_id: str) -> bool:
    return any(e["kind"] == "gave_way" for e in envhub.endpoint(endpoint_id)["pool"]["events"])


def quality_reports(envhub: Envhub, endpoint_id: str) -> list[dict[str, Any]]:
    found = envhub.http.get("/api/checks", params={"endpoint": endpoint_id, "suite": "quality"}).json()
    data: list[dict[str, Any]] = found["data"]
    return data


async def fill_the_pool(envhub: Envhub, endpoint_id: str, let_go: Callable[[], None]) -> list[dict[str, Any]]:
    """A trainer opens exactly what the pool holds while a report holds a session at the gate: every session is
    served, once the report gave way. Returns every reply, resets then steps."""
    url = f"ws://127.0.0.1:{envhub.port}/endpoints/{endpoint_id}/ws"
    sockets = [await websockets.connect(url, open_timeout=30) for _ in range(SLOTS)]
    try:
        for ws in sockets:
            await ws.send(json.dumps({"type": "reset", "data": {}}))
        resets = [asyncio.ensure_future(ws.recv()) for ws in sockets]
        # The last session waits for the report's slot: the report gives it back, and says so in the pool's events.
        await asyncio.to_thread(wait_until, lambda: gave_way(envhub, endpoint_id), timeout_s=30)
        let_go()  # the server ends the report's held reset, and with it that session
        replies = [json.loads(reply) for reply in await asyncio.gather(*resets)]
        for ws in sockets:
            await ws.send(json.dumps({"type": "step", "data": {"add": 1}}))
        replies += [json.loads(await ws.recv()) for ws in sockets]
        assert not quality_reports(envhub, endpoint_id)  # no report ran while the trainer held every slot
        return replies
    finally:
        for ws in sockets:
            await ws.close()


def test_a_trainer_that_fills_the_pool_is_served_before_a_quality_round(
    settings: Settings, tmp_path: Path, count_template: str
) -> None:
    rounds = settings.model_copy(update={"data_dir": tmp_path / "data", "quality_interval_s": 1, "check_timeout_s": 60})
    envhub = Envhub(rounds)
    gate = socket.create_server(("127.0.0.1", 0))
    try:
        gate.settimeout(30)
        env = {"MAX_CONCURRENT_ENVS": str(SLOTS), "COUNT_GATE": f"127.0.0.1:{gate.getsockname()[1]}"}
        endpoint = envhub.running(count_template, options={"env": env})
        held, _ = gate.accept()  # a round's report holds a session on the replica, in its first reset

        def let_go() -> None:
            held.close()
            gate.close()  # later reports pass the gate

        replies = asyncio.run(fill_the_pool(envhub, endpoint["id"], let_go))
        assert len(replies) == 2 * SLOTS
        assert {reply["type"] for reply in replies} == {"observation"}, [
            r for r in replies if r["type"] != "observation"
        ]
        # Once the trainer is gone, a later round files the report it gave way for.
        wait_until(lambda: bool(quality_reports(envhub, endpoint["id"])), timeout_s=60)
        (filed,) = quality_reports(envhub, endpoint["id"])
        assert filed["revision"] == endpoint["revision"]
        assert envhub.endpoint(endpoint["id"])["pool"]["sessions"] == 0
    finally:
        gate.close()
        envhub.end_endpoints()
        envhub.stop()
