"""The MCP door under attack: hostile servers behind an endpoint's /mcp, and hostile clients in front of it.

A replica's message is refused by its frame header however long it claims to be, and so are messages it sends
unasked past the same size; what the door reads of a server over HTTP (its /schema) is cut at a mebibyte; a body
that nests too deep is a JSON-RPC parse error; a /schema read that failed is read again by the next session.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.types import PARSE_ERROR

from app.settings import Settings
from protocol.frames import RPC_SERVER_ERROR
from tests.conftest import wait_until
from tests.redteam.hostile import closes, write_hostile_env
from tests.redteam.test_tasksets import memory_kib
from tests.serving import Envhub

MIB = 1024 * 1024
GROWTH_BOUND_MIB = 48  # what one attack below may add to envhub's peak memory: the door's 16 MiB cap, and slack
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "redteam", "version": "1"}},
}
JSON_FIRST = {"accept": "application/json, text/event-stream"}


@pytest.fixture
def door(settings: Settings, tmp_path: Path, templates_dir: Path) -> Iterator[Envhub]:
    """envhub with hostile servers among its templates."""
    for mode in ("record", "huge_frame", "chatty", "huge_schema", "flaky_schema"):
        write_hostile_env(templates_dir / mode, mode)
    envhub = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data"}))
    yield envhub
    envhub.stop()


def mcp_url(endpoint: dict[str, Any]) -> str:
    return f"/endpoints/{endpoint['id']}/mcp"


def log_of(envhub: Envhub, endpoint: dict[str, Any]) -> Path:
    return envhub.settings.data_dir / "endpoints" / f"{endpoint['id']}.log"


@contextmanager
def peak_growth_mib() -> Iterator[list[float]]:
    """How far this process's peak memory rose above what it held before the block (envhub runs in it), in MiB:
    read into the list once the block is done."""
    Path("/proc/self/clear_refs").write_text("5")  # forget the peak so far
    before = memory_kib(os.getpid(), "VmRSS")
    grown: list[float] = []
    yield grown
    grown.append((memory_kib(os.getpid(), "VmHWM") - before) / 1024)


def test_a_replicas_frame_claiming_exabytes_is_refused_by_its_header(door: Envhub) -> None:
    """The door used to hold a frame's payload until it was whole, and only then see it was over 16 MiB: a replica
    whose frame claims 2**62 bytes had envhub hold all it sent (a GiB sent, a GiB held, after the session ended)."""
    endpoint = door.running("template:huge_frame")
    with peak_growth_mib() as grown:
        answer = door.http.post(mcp_url(endpoint), json=INITIALIZE, headers=JSON_FIRST, timeout=60)
        wait_until(lambda: bool(closes(log_of(door, endpoint))), timeout_s=60)
    [closed] = closes(log_of(door, endpoint))
    assert answer.status_code == 200 and answer.json()["error"]["code"] == RPC_SERVER_ERROR, answer.text
    assert closed["code"] == 1009, closed  # too big, said before the payload was taken
    assert grown[0] < GROWTH_BOUND_MIB, f"the frame took envhub's peak up by {grown[0]:.0f} MiB"


def test_messages_a_replica_sends_unasked_are_bounded(door: Envhub) -> None:
    endpoint = door.running("template:chatty")
    with peak_growth_mib() as grown:
        door.http.post(mcp_url(endpoint), json=INITIALIZE, headers=JSON_FIRST, timeout=60)
        wait_until(lambda: bool(closes(log_of(door, endpoint))), timeout_s=60)
    [closed] = closes(log_of(door, endpoint))
    assert closed["code"] == 1008 and closed["sent"] < 64 * MIB, closed  # a policy broken, after about 16 MiB
    assert grown[0] < GROWTH_BOUND_MIB, f"the unasked messages took envhub's peak up by {grown[0]:.0f} MiB"


def test_a_schema_of_64_mib_is_cut_at_a_mebibyte(door: Envhub) -> None:
    """The door read /schema whole, then parsed it: 512 MiB took envhub's peak to 4 GiB."""
    endpoint = door.running("template:huge_schema")
    with peak_growth_mib() as grown:
        answer = door.http.post(mcp_url(endpoint), json=INITIALIZE, headers=JSON_FIRST, timeout=60)
    assert answer.status_code == 200 and answer.json()["error"]["code"] == RPC_SERVER_ERROR, answer.text
    assert grown[0] < GROWTH_BOUND_MIB, f"the schema took envhub's peak up by {grown[0]:.0f} MiB"
    assert door.endpoint(endpoint["id"])["pool"]["sessions"] == 0  # the slot it took is free again


def test_json_nested_too_deep_is_a_parse_error(door: Envhub) -> None:
    endpoint = door.running("template:record")
    deep = b"[" * 100_000 + b"]" * 100_000
    in_params = b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"x": ' + deep + b"}}"
    headers = JSON_FIRST | {"content-type": "application/json"}
    answers = [
        door.http.post(mcp_url(endpoint), content=deep, headers=headers | {"mcp-session-id": "x"}),
        door.http.post(mcp_url(endpoint), content=deep, headers=headers),
        door.http.post(mcp_url(endpoint), content=in_params, headers=headers),
    ]
    assert [(a.status_code, a.json()["error"]["code"]) for a in answers] == [(400, PARSE_ERROR)] * 3


def test_a_failed_schema_read_is_read_again_by_the_next_session(door: Envhub) -> None:
    """The door remembered the first /schema read even when it failed: the endpoint's door stayed shut (no action
    to offer) until envhub restarted."""
    endpoint = door.running("template:flaky_schema")
    first = door.http.post(mcp_url(endpoint), json=INITIALIZE, headers=JSON_FIRST, timeout=60)
    assert first.json()["error"]["code"] == RPC_SERVER_ERROR, first.text  # its /schema failed: no action known
    second = door.http.post(mcp_url(endpoint), json=INITIALIZE, headers=JSON_FIRST, timeout=60)
    assert "result" in second.json(), second.text
    tools = door.http.post(
        mcp_url(endpoint),
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers=JSON_FIRST | {"mcp-session-id": second.headers["mcp-session-id"]},
    )
    assert "step" in {tool["name"] for tool in tools.json()["result"]["tools"]}, tools.text
