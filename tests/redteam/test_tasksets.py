"""Hostile datasets: an environment's card links datasets (anyone can publish one) whose files are small on the
Hub and huge once read, and anyone, signed in or not, asks envhub for the environment's tasksets. envhub runs
as its own process, so its memory is what is measured."""

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.settings import Settings
from tests.conftest import ADMIN_TOKEN, wait_until
from tests.fakehub import FakeHub
from tests.serving import Envhub
from tests.test_cli import cli_env
from tests.test_serve import Server
from tests.test_templates import make_template

MIB = 2**20
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
GROWTH_BOUND_MIB = 100  # what reading every hostile dataset below may add to envhub's peak memory


def parquet(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    return buffer.getvalue()


def memory_kib(pid: int, field: str) -> int:
    """A line of /proc/<pid>/status, in KiB: VmHWM is the most the process held (since its peak was last reset),
    VmRSS what it holds now."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def fine_rows(count: int) -> list[dict[str, Any]]:
    return [{"openenv_reset": json.dumps({"index": i}), "note": f"row {i}"} for i in range(count)]


@pytest.fixture
def hostile_hub(hub: FakeHub) -> FakeHub:
    # 4096 rows share one 256 KiB reset: a dictionary page holds it once, and the file is under 1 KiB. Read out it
    # is 1 GiB.
    reset = json.dumps({"pad": "x" * (256 * 1024)})
    bomb = pa.table({"openenv_reset": pa.array([reset] * 4096)})
    hub.add_dataset("mallory/bomb", files={"train.parquet": parquet(bomb)})
    # One value of 96 MiB, which zstd writes in a few KiB.
    hub.add_dataset("mallory/huge-cell", files={"train.parquet": parquet(pa.table({"prompt": ["y" * (96 * MIB)]}))})
    # One value of 8 MiB: small enough to be read from the file, too large to become a row.
    hub.add_dataset("mallory/long-value", files={"train.parquet": parquet(pa.table({"prompt": ["z" * (8 * MIB)]}))})
    # A JSONL file of one 48 MiB line.
    hub.add_dataset("mallory/long-line", files={"train.jsonl": json.dumps({"prompt": "w" * (48 * MIB)}) + "\n"})
    hub.add_dataset("alice/fine", files={"train.parquet": parquet(pa.Table.from_pylist(fine_rows(20)))})
    return hub


@pytest.fixture
def envhub(hostile_hub: FakeHub, tmp_path: Path) -> Iterator[Server]:
    templates = tmp_path / "templates"
    make_template(templates, "honest", "title: Honest\ntags: [openenv]\ndatasets:\n  - alice/fine")
    linked = ["mallory/bomb", "mallory/huge-cell", "mallory/long-value", "mallory/long-line", "alice/fine"]
    card = "title: Trap\ntags: [openenv]\ndatasets:\n" + "".join(f"  - {d}\n" for d in linked)
    make_template(templates, "trap", card)
    env = cli_env(tmp_path, hostile_hub.url) | {
        "ENVHUB_TEMPLATES_DIR": str(templates),
        "ENVHUB_ADMIN_TOKEN": ADMIN_TOKEN,
        "ENVHUB_UI": "false",
        "ENVHUB_PROCESS_PRELOAD": "off",
        "ENVHUB_DATA_DIR": str(tmp_path / "data"),
    }
    server = Server(env)
    try:
        wait_until(server.healthy, timeout_s=60)
        synced = httpx.post(f"{server.url}/api/sync", headers=ADMIN, timeout=30)
        assert synced.status_code in (200, 202, 409), synced.text  # 409: the sync at start-up is running
        wait_until(lambda: httpx.get(f"{server.url}/api/datasets/alice/fine", timeout=5).status_code == 200, 30)
        yield server
    finally:
        server.stop()


def test_datasets_that_expand_when_read_cost_bounded_memory_and_say_what_they_pass(envhub: Server) -> None:
    pid = envhub.process.pid
    # An honest environment first: pyarrow imported, a parquet file read, the server warm.
    honest = httpx.get(f"{envhub.url}/api/environments/template:honest/tasksets", timeout=60)
    assert honest.status_code == 200, honest.text
    assert honest.json()["datasets"][0]["splits"][0]["rows"] == 20
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # forget the peak so far (start-up's imports)
    before = memory_kib(pid, "VmRSS")

    answer = httpx.get(f"{envhub.url}/api/environments/template:trap/tasksets", timeout=60)
    # An evaluation of 200 of the bomb's rows would hold 50 MiB of resets.
    played = httpx.post(
        f"{envhub.url}/api/evaluations",
        json={"environment": "template:trap", "dataset": "mallory/bomb", "split": "train", "indices": list(range(200))},
        timeout=60,
    )

    grown_mib = (memory_kib(pid, "VmHWM") - before) / 1024
    assert answer.status_code == 200, answer.text
    datasets = {d["dataset"]: d for d in answer.json()["datasets"]}
    problems = {name: d["problem"] or "" for name, d in datasets.items()}
    # The bomb's rows are counted from its metadata and previewed a few at a time, each value cut.
    [split] = datasets["mallory/bomb"]["splits"]
    assert split["rows"] == 4096 and problems["mallory/bomb"] == "", problems
    assert [len(row["openenv_reset"]) for row in split["preview"]] == [301, 301, 301]
    assert (played.status_code, played.json()["code"]) == (422, "rows_too_large"), played.text
    assert "decompresses to 96 MiB, over the 16 MiB" in problems["mallory/huge-cell"], problems
    assert "holds a value of 8 MiB" in problems["mallory/long-value"], problems
    assert "a row is over 1 MiB" in problems["mallory/long-line"], problems
    assert problems["alice/fine"] == "", problems  # the honest dataset beside them is read as ever
    assert grown_mib < GROWTH_BOUND_MIB, f"reading the hostile datasets took envhub's peak up by {grown_mib:.0f} MiB"
    assert httpx.get(f"{envhub.url}/api/health", timeout=10).status_code == 200


def test_downloads_are_capped_per_request_and_per_hour(settings: Settings, hub: FakeHub, tmp_path: Path) -> None:
    rows = parquet(pa.Table.from_pylist(fine_rows(4)))
    hub.add_dataset("mallory/many", files={f"{split}.parquet": rows for split in ("train", "test", "validation")})
    hub.add_dataset("mallory/more", files={"train.parquet": rows})
    templates = tmp_path / "templates"
    make_template(templates, "greedy", "title: Greedy\ntags: [openenv]\ndatasets:\n  - mallory/many\n  - mallory/more")
    capped = {"taskset_downloads_per_request": 2, "taskset_downloads_per_hour": 3}
    envhub = Envhub(settings.model_copy(update={"templates_dir": templates, "data_dir": tmp_path / "data"} | capped))
    try:
        assert envhub.http.post("/api/sync", headers=ADMIN).status_code in (200, 202, 409)
        wait_until(lambda: envhub.http.get("/api/datasets/mallory/more").status_code == 200, 30)

        def problems() -> dict[str, str]:
            answer = envhub.http.get("/api/environments/template:greedy/tasksets")
            assert answer.status_code == 200, answer.text
            return {d["dataset"]: d["problem"] or "" for d in answer.json()["datasets"]}

        first = problems()
        assert "at most 2 dataset files per request (ENVHUB_TASKSET_DOWNLOADS_PER_REQUEST)" in first["mallory/many"]
        assert "ask again to read the rest" in first["mallory/more"]
        # The files read so far are kept: asking again reads the third, and the hour's budget is spent.
        second = problems()
        assert second["mallory/many"] == "", second
        hourly = "downloaded 3 dataset files in the last hour (ENVHUB_TASKSET_DOWNLOADS_PER_HOUR); try again in 60 min"
        assert hourly in second["mallory/more"], second
        played = envhub.http.post(
            "/api/evaluations",
            json={"environment": "template:greedy", "dataset": "mallory/more", "split": "train", "indices": [0]},
        )
        assert (played.status_code, played.json()["code"]) == (429, "downloads_per_hour"), played.text
    finally:
        envhub.stop()


def test_one_client_or_one_dataset_cannot_spend_the_hours_downloads_for_everyone(
    settings: Settings, hub: FakeHub, tmp_path: Path
) -> None:
    rows = parquet(pa.Table.from_pylist(fine_rows(4)))
    hub.add_dataset("mallory/shards", files={f"train/part-{i}.parquet": rows for i in range(8)})
    hub.add_dataset("alice/fine", files={"train.parquet": rows})
    templates = tmp_path / "templates"
    make_template(templates, "greedy", "title: Greedy\ntags: [openenv]\ndatasets:\n  - mallory/shards")
    make_template(templates, "honest", "title: Honest\ntags: [openenv]\ndatasets:\n  - alice/fine")
    capped = {
        "taskset_downloads_per_request": 2,
        "taskset_downloads_per_hour": 6,
        "taskset_downloads_per_client_hour": 3,
        "taskset_downloads_per_dataset_hour": 4,
    }
    envhub = Envhub(settings.model_copy(update={"templates_dir": templates, "data_dir": tmp_path / "data"} | capped))
    # Two anonymous clients, each from an address of its own (the whole of 127/8 is loopback).
    mallory, bob = (
        httpx.Client(base_url=envhub.url, timeout=30, transport=httpx.HTTPTransport(local_address=address))
        for address in ("127.0.0.2", "127.0.0.3")
    )
    try:
        assert envhub.http.post("/api/sync", headers=ADMIN).status_code in (200, 202, 409)
        wait_until(lambda: envhub.http.get("/api/datasets/alice/fine").status_code == 200, 30)

        def problem(client: httpx.Client, environment: str) -> str | None:
            """The code of the problem reading the environment's one dataset; None when it was read whole."""
            answer = client.get(f"/api/environments/template:{environment}/tasksets")
            assert answer.status_code == 200, answer.text
            [dataset] = answer.json()["datasets"]
            if [split["rows"] for split in dataset["splits"]] == [4 * (8 if environment == "greedy" else 1)]:
                return None
            return str(dataset.get("problem_code") or dataset["problem"])

        # Mallory asks again and again: two files a request, until her own hour's three are spent.
        spent = [problem(mallory, "greedy") for _ in range(4)]
        played = mallory.post(
            "/api/evaluations",
            json={"environment": "template:greedy", "dataset": "mallory/shards", "split": "train", "indices": [0]},
        )
        # Bob still downloads: one more of Mallory's dataset, until that dataset's four are spent; then another
        # dataset is read whole.
        bob_greedy = problem(bob, "greedy")
        bob_honest = problem(bob, "honest")

        assert bob_honest is None, f"Bob's dataset was not read: {bob_honest}"
        assert bob_greedy == "dataset_downloads_per_hour", bob_greedy
        assert spent == ["downloads_per_request"] + ["client_downloads_per_hour"] * 3, spent
        assert played.status_code == 429 and played.json()["code"] == "client_downloads_per_hour", played.text
    finally:
        mallory.close()
        bob.close()
        envhub.stop()


def test_rows_nested_too_deep_are_their_splits_problem_and_a_422(
    settings: Settings, hub: FakeHub, tmp_path: Path
) -> None:
    deep = "[" * 100_000 + "]" * 100_000  # 200 KB, under a row's bound; Python's parser gives up past 1000
    fine = "".join(json.dumps(row) + "\n" for row in fine_rows(3))
    hub.add_dataset(
        "mallory/deep", files={"train.jsonl": fine + '{"openenv_reset": ' + deep + "}\n", "test.jsonl": fine}
    )
    # Past the rows counted (from metadata) and previewed: row 5's reset is read only when played.
    resets = [json.dumps({"index": i}) for i in range(8)]
    resets[5] = '{"x": ' + deep + "}"
    hub.add_dataset("mallory/deep-reset", files={"train.parquet": parquet(pa.table({"openenv_reset": resets}))})
    templates = tmp_path / "templates"
    card = "title: Deep\ntags: [openenv]\ndatasets:\n  - mallory/deep\n  - mallory/deep-reset"
    make_template(templates, "deep", card)
    envhub = Envhub(settings.model_copy(update={"templates_dir": templates, "data_dir": tmp_path / "data"}))
    try:
        assert envhub.http.post("/api/sync", headers=ADMIN).status_code in (200, 202, 409)
        wait_until(lambda: envhub.http.get("/api/datasets/mallory/deep-reset").status_code == 200, 30)

        answer = envhub.http.get("/api/environments/template:deep/tasksets")
        played = envhub.http.post(
            "/api/evaluations",
            json={"environment": "template:deep", "dataset": "mallory/deep-reset", "split": "train", "indices": [5]},
        )

        assert answer.status_code == 200, answer.text
        datasets = {d["dataset"]: d for d in answer.json()["datasets"]}
        assert datasets["mallory/deep"]["problem_code"] == "unreadable_split", datasets["mallory/deep"]
        assert [(s["name"], s["rows"]) for s in datasets["mallory/deep"]["splits"]] == [("test", 3)]  # the rest reads
        assert datasets["mallory/deep-reset"]["problem"] is None and datasets["mallory/deep-reset"]["splits"]
        assert played.status_code == 422 and played.json()["code"] == "nested_too_deep", played.text
        assert envhub.http.get("/api/health").status_code == 200
    finally:
        envhub.stop()
