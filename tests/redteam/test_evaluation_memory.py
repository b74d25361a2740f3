"""A signed-in user, mallory, on a public envhub evaluates on an environment of her own that answers every reset
and step with an observation of nearly 256 KiB and never ends: episodes at once, each of many steps, all within
the caps. What envhub's process holds while the run plays, and what the run adds to the database, are measured."""

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.settings import Settings
from tests.conftest import wait_until
from tests.environments import write_count_env
from tests.fakehub import FakeHub
from tests.serving import Envhub
from tests.signin import oauth_settings

MALLORY = {"Authorization": "Bearer hf_mallory"}
OBSERVATION_CHARS = 255 * 1024  # under the 256 KiB a record keeps of one observation: each would be kept whole
EPISODES, STEPS = 4, 200  # 800 steps: 200 MiB of observations, were the episodes held or stored whole
BUDGET_BYTES = 8 * 1024 * 1024  # what the run may store with its observations whole
CUT_RECORD_BYTES = 8 * 1024  # a step stored past the budget: its observation's start and digest, with SQLite's pages
GROWTH_BOUND_MIB = 64  # what the run may add to envhub's peak memory, however many steps it plays


def write_bulky_env(folder: Path) -> None:
    """The counting game, but every observation carries a large blob and no episode ends."""
    write_count_env(folder)
    models = folder / "models.py"
    models.write_text(models.read_text().replace("    total: int = 0\n", '    total: int = 0\n    blob: str = ""\n'))
    environment = folder / "server" / "environment.py"
    source = environment.read_text().replace("done = self._total >= GOAL", "done = False")
    blob = f'blob="x" * {OBSERVATION_CHARS}, '
    environment.write_text(
        source.replace("CountObservation(total=self._total, ", f"CountObservation({blob}total=self._total, ")
    )


@pytest.fixture
def public(settings: Settings, hub: FakeHub, tmp_path: Path, templates_dir: Path) -> Iterator[Envhub]:
    hub.users = {"hf_mallory": "mallory"}
    write_bulky_env(templates_dir / "bulky")
    server = Envhub(oauth_settings(settings, data_dir=tmp_path / "data", evaluation_budget_bytes=BUDGET_BYTES))
    yield server
    server.end_endpoints()
    server.stop()


def kib(field: str) -> int:
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(field + ":"))
    return int(line.split()[1])


def stored_bytes(database: Path) -> int:
    """The database file's size with its write-ahead log folded in."""
    with sqlite3.connect(database) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return database.stat().st_size


def finished(envhub: Envhub, **body: object) -> dict[str, object]:
    created = envhub.http.post("/api/evaluations", json={"policy": "random", **body}, headers=MALLORY)
    assert created.status_code == 201, created.text
    path = f"/api/evaluations/{created.json()['id']}"
    # A run that holds its episodes whole is slow to answer while it writes them: the question waits for it.
    wait_until(lambda: envhub.http.get(path, timeout=300).json()["status"] not in ("queued", "running"), 600, 0.5)
    run: dict[str, object] = envhub.http.get(path).json()
    assert run["status"] == "finished", run["message"]
    return run


def test_an_evaluation_of_large_observations_holds_and_stores_a_bounded_amount(public: Envhub, tmp_path: Path) -> None:
    launched = public.http.post("/api/endpoints", json={"environment": "template:bulky"}, headers=MALLORY)
    assert launched.status_code == 201, launched.text
    endpoint = launched.json()["id"]
    wait_until(lambda: public.endpoint(endpoint)["status"] in ("running", "failed"), 120)
    assert public.endpoint(endpoint)["status"] == "running", public.endpoint(endpoint)["message"]
    finished(public, endpoint=endpoint, episodes=1, max_steps=2)  # what a first run imports is not what is measured
    database = tmp_path / "data" / "envhub.db"
    before = stored_bytes(database)
    Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from here (envhub runs in this process)
    resident = kib("VmRSS")

    run = finished(public, endpoint=endpoint, episodes=EPISODES, concurrency=EPISODES, max_steps=STEPS)

    grown_mib = (kib("VmHWM") - resident) / 1024
    grown_bytes = stored_bytes(database) - before
    episodes = run["episodes"]
    assert isinstance(episodes, list) and [(e["status"], e["steps"]) for e in episodes] == [("cut", STEPS)] * EPISODES
    assert grown_mib < GROWTH_BOUND_MIB, f"the run took envhub's peak memory up by {grown_mib:.0f} MiB"
    records = EPISODES * (STEPS + 1)
    assert grown_bytes < BUDGET_BYTES + records * CUT_RECORD_BYTES, f"the run stored {grown_bytes / 2**20:.0f} MiB"
    # Every step is there: its observation whole while the budget lasted, then its start and digest.
    lines = public.http.get(f"/api/evaluations/{run['id']}/episodes.jsonl", timeout=300).text.splitlines()
    kept = [record["observation"] for line in lines for record in json.loads(line)["records"]]
    assert len(kept) == records
    assert "blob" in kept[0] and "blob" not in kept[-1] and {"start", "sha256"} <= set(kept[-1])
