"""Agent-session recordings under attack: an anonymous client of a public endpoint's MCP door sends large tool
arguments and reset options over many episodes, and reads a large recording back.

What a recording keeps is bounded: what the client sent is cut to its start and sha256 as observations are, each
session keeps its budget of bytes and each client (here an address) its own, the oldest episodes going first; and
reading a recording costs envhub a bounded amount of memory, whatever its size.
"""

import asyncio
import hashlib
import json
import secrets
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from app.settings import Settings
from evals.models import AgentSession, Episode
from tests.conftest import wait_until
from tests.mcpclients import mcp
from tests.serving import Envhub

SESSION_BYTES = 256 * 1024
BUDGET_BYTES = 640 * 1024
PAD_CHARS = 256 * 1024  # of each tool call's arguments and each reset's options
SESSIONS, EPISODES, STEPS = 3, 4, 4


@pytest.fixture
def recording(settings: Settings, tmp_path: Path, count_template: str) -> Iterator[Envhub]:
    """envhub with small recording budgets, to pass them quickly."""
    configured = settings.model_copy(
        update={
            "data_dir": tmp_path / "data",
            "recording_session_bytes": SESSION_BYTES,
            "recording_budget_bytes": BUDGET_BYTES,
        }
    )
    envhub = Envhub(configured)
    yield envhub
    envhub.end_endpoints()
    envhub.stop()


def stored(envhub: Envhub, session_ids: list[str]) -> dict[str, dict[int, int]]:
    """The bytes of each episode's records as the database holds them, by session and index."""
    with Session(envhub.services.engine) as db:
        rows = db.exec(select(Episode).where(Episode.evaluation.in_(session_ids))).all()  # type: ignore[attr-defined]
        found: dict[str, dict[int, int]] = {s: {} for s in session_ids}
        for row in rows:
            found[row.evaluation][row.index] = len(json.dumps(row.records, ensure_ascii=False).encode())
    return found


def test_an_anonymous_client_sending_large_arguments_over_many_episodes_keeps_within_the_budgets(
    recording: Envhub,
) -> None:
    endpoint = recording.running("template:count")
    last_arguments: dict[str, Any] = {}

    async def play() -> None:
        for _ in range(SESSIONS):
            async with mcp(endpoint["url"]) as session:
                for _ in range(EPISODES):
                    await session.call_tool("reset", {"options": {"pad": secrets.token_hex(PAD_CHARS // 2)}})
                    for _ in range(STEPS):
                        last_arguments.update(add=1, pad=secrets.token_hex(PAD_CHARS // 2))
                        refused = await session.call_tool("step", dict(last_arguments))
                        assert refused.isError  # the count environment takes no pad

    asyncio.run(play())
    path = f"/api/endpoints/{endpoint['id']}/sessions"
    wait_until(lambda: [s["status"] for s in recording.http.get(path).json()["data"]] == ["ended"] * SESSIONS, 30)
    listed = recording.http.get(path).json()["data"]
    oldest_first = [s["id"] for s in reversed(listed)]
    kept = stored(recording, oldest_first)

    sizes = [size for episodes in kept.values() for size in episodes.values()]
    assert sum(sizes) <= BUDGET_BYTES  # sent: 2 * 3 * 4 * 5 * 256 KiB, as arguments, actions and options
    assert all(sum(episodes.values()) <= SESSION_BYTES for episodes in kept.values())
    played = SESSIONS * EPISODES
    assert sum(s["dropped"] for s in listed) == played - len(sizes) > 0
    for episodes in kept.values():  # within a session the newest are kept: the indexes left are its last
        assert sorted(episodes) == list(range(EPISODES - len(episodes), EPISODES))
    assert 0 not in kept[oldest_first[0]] and EPISODES - 1 in kept[oldest_first[-1]]  # the oldest went first

    newest = recording.http.get(f"{path}/{oldest_first[-1]}").json()
    last_step = newest["episodes"][-1]["records"][-1]
    sent = json.dumps(last_arguments, ensure_ascii=False)
    for field in ("arguments", "action"):
        assert last_step[field]["sha256"] == hashlib.sha256(sent.encode()).hexdigest()
        assert sent.startswith(last_step[field]["start"]) and 0 < len(last_step[field]["start"]) < len(sent) // 8
    reset = newest["episodes"][-1]["records"][0]
    assert set(reset["options"]) == {"cut", "start", "sha256"} and reset["options"]["start"].startswith('{"pad": "')


RECORDING_EPISODES = 64
RECORD_CHARS = 60 * 1024  # one observation, kept whole
RECORDS = 16  # an episode: about 1 MiB
GROWTH_BOUND = 24 * 1024 * 1024  # what reading a recording of about 64 MiB may add to envhub's traced memory


@pytest.fixture
def roomy(settings: Settings, tmp_path: Path, count_template: str) -> Iterator[Envhub]:
    """envhub whose recordings may be large."""
    budget = 2 * RECORDING_EPISODES * RECORDS * RECORD_CHARS
    configured = settings.model_copy(
        update={"data_dir": tmp_path / "data", "recording_session_bytes": budget, "recording_budget_bytes": budget}
    )
    envhub = Envhub(configured)
    yield envhub
    envhub.end_endpoints()
    envhub.stop()


def test_reading_a_large_recording_costs_envhub_bounded_memory(roomy: Envhub) -> None:
    envhub = roomy
    endpoint = envhub.running("template:count")
    agents = envhub.services.agents
    session_id = "as-large"
    agents.open(AgentSession(id=session_id, endpoint=endpoint["id"], environment="count", client="agent"))
    for index in range(RECORDING_EPISODES):
        records = [
            {"kind": "step", "index": n, "observation": {"text": f"{index}:{n}:" + "x" * RECORD_CHARS}}
            for n in range(RECORDS)
        ]
        episode = Episode(
            id=f"{session_id}-{index}",
            evaluation=session_id,
            index=index,
            status="done",
            reward=1.0,
            steps=RECORDS,
            invalid=0,
            tokens=0,
            wall_s=1.0,
            records=records,
        )
        agents.write_episode(episode)
    recording_bytes = RECORDING_EPISODES * RECORDS * RECORD_CHARS

    tracemalloc.start()  # envhub serves from this process: its allocations are traced with the test's
    try:
        with envhub.http.stream("GET", f"/api/endpoints/{endpoint['id']}/sessions/{session_id}") as answer:
            assert answer.status_code == 200
            size, tail = 0, b""
            for chunk in answer.iter_bytes():
                size, tail = size + len(chunk), (tail + chunk)[-64:]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert size > recording_bytes and tail.endswith(b"]}")
    assert peak < GROWTH_BOUND, f"reading {size:,} bytes peaked at {peak:,} bytes"
