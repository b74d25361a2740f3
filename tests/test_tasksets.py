"""Tasksets: datasets linked to an environment, read from the fake Hub (parquet and JSONL files at the synced
revision), previewed on the environment's API, and played row by row as reset options (by evaluations, the Play tab
and an agent through the MCP door)."""

import asyncio
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from huggingface_hub import HfApi
from mcp.types import CallToolResult

from app.settings import Settings
from catalog.tasksets import reset_options
from tests.conftest import ADMIN_TOKEN, needs, wait_until
from tests.fakehub import FakeHub
from tests.mcpclients import mcp, structured, text_of
from tests.serving import TEMPLATES, Envhub
from tests.ui.browser import WAIT, chromium, chromium_available, expect, open_page

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def parquet(rows: list[dict[str, Any]]) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    return buffer.getvalue()


def task_rows(split: str, count: int) -> list[dict[str, Any]]:
    """Rows that name an arithmetic task by its split and index, the way the template's reset takes it."""
    return [
        {"id": f"{split}-{i}", "openenv_reset": json.dumps({"split": split, "index": i}), "note": "x" * 400}
        for i in range(count)
    ]


@pytest.fixture
def linked(settings: Settings, hub: FakeHub, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Envhub]:
    """The arithmetic template, linked by its card to two datasets on the fake Hub: one whose rows carry
    `openenv_reset` (a parquet train split, a JSONL test split, named as `push_to_hub` names shards), one whose
    rows do not. Its web page is served to the browser test only."""
    templates = tmp_path / "templates-linked"
    for name in ("arithmetic_tasks", "wordle"):
        shutil.copytree(TEMPLATES / name, templates / name)
    readme = templates / "arithmetic_tasks" / "README.md"
    readme.write_text(
        readme.read_text().replace(
            "---\n", "---\ndatasets:\n  - alice/arith\n  - alice/broken\n  - alice/gone\n  - alice/notes\n", 1
        )
    )
    train = task_rows("train", 12)
    test = "".join(
        json.dumps(row | {"openenv_reset": json.loads(row["openenv_reset"])}) + "\n" for row in task_rows("test", 5)
    )
    hub.add_dataset(
        "alice/arith",
        files={
            "README.md": "# Arithmetic tasks\n",
            "data/train-00000-of-00001.parquet": parquet(train),
            # Sharded names for both: beside a shard, the Hub puts a file named otherwise (test.jsonl) in no split.
            "data/test-00000-of-00001.jsonl": test,
        },
    )
    hub.add_dataset("alice/broken", files={"train.jsonl": '{"openenv_reset": {}}\nnot json\n', "test.csv": b"\xff\xfe"})
    hub.add_dataset("alice/notes", files={"notes.csv": "question,answer\n1+1,2\n2+2,4\n"})
    server = Envhub(
        settings.model_copy(
            update={"data_dir": tmp_path / "data", "templates_dir": templates, "allow_private_urls": True}
        ),
        ui=request.node.get_closest_marker("browser") is not None,
    )
    synced = server.http.post("/api/sync", headers=ADMIN)
    assert synced.status_code in (200, 202), synced.text
    wait_until(lambda: server.http.get("/api/datasets/alice/arith").status_code == 200, timeout_s=30)
    yield server
    server.stop()


def test_the_environment_lists_its_datasets_splits_row_counts_and_first_rows(linked: Envhub, hub: FakeHub) -> None:
    answer = linked.http.get("/api/environments/template:arithmetic_tasks/tasksets")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["takes_tasks"] is True and body["note"] is None
    arith, broken, gone, notes = body["datasets"]
    assert arith["dataset"] == "alice/arith"
    assert arith["revision"] == HfApi(endpoint=hub.url, token=False).dataset_info("alice/arith").sha
    splits = {s["name"]: s for s in arith["splits"]}
    assert (splits["train"]["rows"], splits["test"]["rows"]) == (12, 5)
    assert splits["train"]["files"] == ["data/train-00000-of-00001.parquet"]
    assert [row["id"] for row in splits["train"]["preview"]] == ["train-0", "train-1", "train-2"]
    assert len(splits["train"]["preview"][0]["note"]) < 400  # long values are cut in the preview
    assert "openenv_reset" in arith["resets_by"] and arith["problem"] is None
    # A dataset whose rows name no reset, for an environment that names no reset key, says so.
    assert notes["resets_by"] is None and "reset_key" in notes["problem"]
    assert [(s["name"], s["rows"]) for s in notes["splits"]] == [("train", 2)]
    # Files that are not what their names say are that split's problem; the dataset's other splits still show.
    assert "split train could not be read" in broken["problem"] and "split test could not be read" in broken["problem"]
    # A linked dataset the Hub does not have is that dataset's problem, not the page's.
    assert gone["splits"] == [] and "not on the Hub" in gone["problem"]


def test_an_evaluation_plays_a_datasets_rows_as_resets(linked: Envhub) -> None:
    created = linked.http.post(
        "/api/evaluations",
        json={
            "environment": "template:arithmetic_tasks",
            "policy": "first-legal",
            "dataset": "alice/arith",
            "split": "train",
            "indices": [4, 9],
        },
    )
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    wait_until(lambda: linked.http.get(f"/api/evaluations/{run_id}").json()["status"] == "finished", timeout_s=120)
    run = linked.http.get(f"/api/evaluations/{run_id}").json()
    revision = run["taskset"]["revision"]
    assert run["taskset"] == {"dataset": "alice/arith", "revision": revision, "split": "train", "indices": [4, 9]}
    assert run["taskset_label"] == f"dataset:alice/arith@{revision[:12]}:train"
    assert [e["task"] for e in run["episodes"]] == [{"split": "train", "index": 4}, {"split": "train", "index": 9}]
    assert [e["status"] for e in run["episodes"]] == ["done", "done"]
    board = linked.http.get("/api/environments/template:arithmetic_tasks/leaderboard").json()
    assert [g["taskset"] for g in board["groups"]] == [run["taskset_label"]]


def test_a_dataset_that_cannot_reset_or_a_missing_row_is_refused_with_the_reason(linked: Envhub) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"dataset": "alice/notes", "split": "train", "episodes": 1}, "dataset_cannot_reset"),
        ({"dataset": "alice/arith", "split": "dev", "episodes": 1}, "split_unknown"),
        ({"dataset": "alice/arith", "split": "test", "indices": [5]}, "row_out_of_range"),  # it has rows 0 to 4
        ({"dataset": "bob/unlinked", "split": "train", "episodes": 1}, "dataset_not_linked"),
    ]
    for extra, code in cases:
        body: dict[str, Any] = {"environment": "template:arithmetic_tasks", "policy": "random"} | extra
        response = linked.http.post("/api/evaluations", json=body)
        assert (response.status_code, response.json()["code"]) == (422, code), (extra, response.text)


def test_an_agent_resets_on_a_datasets_row_through_the_mcp_door(linked: Envhub) -> None:
    endpoint = linked.running("template:arithmetic_tasks")
    url = f"{linked.url}/endpoints/{endpoint['id']}"

    async def play() -> tuple[dict[str, Any], list[CallToolResult]]:
        async with mcp(url) as session:
            reset = next(t for t in (await session.list_tools()).tools if t.name == "reset")
            results = [await session.call_tool("reset", {"dataset": "alice/arith", "split": "test", "index": 2})]
            results.append(await session.call_tool("state", {}))
            results.append(await session.call_tool("reset", {"dataset": "alice/arith", "split": "test", "index": 5}))
            results.append(await session.call_tool("reset", {"dataset": "alice/notes", "split": "train"}))
            results.append(await session.call_tool("reset", {"dataset": "alice/arith"}))
            return reset.inputSchema, results

    schema, (row, state, past_the_end, no_reset, no_split) = asyncio.run(play())
    assert schema["properties"]["dataset"]["enum"] == ["alice/arith", "alice/broken", "alice/gone", "alice/notes"]
    assert not row.isError and structured(state)["observation"]["task_id"] == "test-0002"
    assert past_the_end.isError and "rows 0 to 4" in text_of(past_the_end)
    assert no_reset.isError and "cannot reset" in text_of(no_reset)
    assert no_split.isError and "name the split of alice/arith" in text_of(no_split)
    sessions = linked.http.get(f"/api/endpoints/{endpoint['id']}/sessions").json()["data"]
    [recorded] = [linked.http.get(f"/api/endpoints/{endpoint['id']}/sessions/{s['id']}").json() for s in sessions]
    assert [e["task"] for e in recorded["episodes"]] == [
        {"dataset": "alice/arith", "split": "test", "index": 2, "options": {"split": "test", "index": 2}}
    ]


def test_an_environment_without_tasks_says_so(linked: Envhub) -> None:
    body = linked.http.get("/api/environments/template:wordle/tasksets").json()
    assert (body["takes_tasks"], body["task_api"], body["datasets"]) == (False, [], [])
    assert "takes no tasks" in body["note"]


def test_a_row_resets_by_its_openenv_reset_column_or_whole_under_the_named_key() -> None:
    assert reset_options({"openenv_reset": {"level": 2}, "x": 1}, "task") == {"level": 2}
    assert reset_options({"openenv_reset": '{"level": 3}'}, None) == {"level": 3}
    assert reset_options({"question": "1+1", "answer": 2}, "task") == {"task": {"question": "1+1", "answer": 2}}
    assert reset_options({"question": "1+1"}, None) is None


@pytest.mark.browser
@needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)")
def test_the_tasks_tab_previews_a_dataset_and_play_resets_on_one_of_its_rows(linked: Envhub) -> None:
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(WAIT)
        open_page(page, linked.url + "/?env=template:arithmetic_tasks")
        # The first page a fresh server builds takes a while on a loaded machine.
        expect(page.locator("#env-header h1")).to_contain_text("Arithmetic", timeout=60_000)
        page.get_by_role("tab", name="Tasks").click()
        tasks = page.locator("#env-tasks")
        expect(tasks).to_contain_text("alice/arith")
        expect(tasks).to_contain_text("12 rows")
        expect(tasks.locator("table.preview").first).to_contain_text("train-0")
        expect(tasks).to_contain_text("not on the Hub")  # alice/gone
        page.locator("#open-play").click()
        page.locator("#play-launch").click()
        expect(page.locator("#play-status")).to_contain_text("Connected to", timeout=90_000)
        page.locator("#play-split input").first.click()
        page.get_by_role("option", name="alice/arith · test (5 rows)", exact=True).click()
        page.locator("#play-index").locator("input, textarea").first.fill("2")
        page.locator("#play-reset").click()
        expect(page.locator("#play-observation")).to_contain_text("test-0002")
        # The Evaluate tab plays the first rows of a dataset's split.
        page.get_by_role("tab", name="Evaluate").click()
        page.locator("#eval-tasks input").first.click()
        page.get_by_role("option", name="alice/arith · test (5 rows)", exact=True).click()
        page.locator("#eval-episodes input").first.fill("2")
        page.locator("#eval-run").click()
        expect(page.locator("#eval-progress")).to_contain_text("finished", timeout=90_000)
        expect(page.locator("#eval-results")).to_contain_text('{"split": "test", "index": 1}')
        expect(page.locator("#eval-leaderboard")).to_contain_text("dataset:alice/arith@")
