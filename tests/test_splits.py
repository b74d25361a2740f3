"""A dataset's splits as the Hub's dataset viewer has them, and its rows typed as its files say, read from the fake
Hub by the tasksets reader: split keywords in file and folder names, a card's `configs`, and CSV columns that are
numbers, booleans and nulls."""

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from catalog.tasksets import DatasetTaskset, Tasksets
from tests.fakehub import FakeHub


def parquet(rows: list[dict[str, Any]]) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    return buffer.getvalue()


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def read(hub: FakeHub, tmp_path: Path, dataset_id: str, card: dict[str, Any] | None = None) -> DatasetTaskset:
    return Tasksets(hub.url, None, tmp_path / "cache").read(dataset_id, None, card or {}, reset_key="task")


def files_by_split(taskset: DatasetTaskset) -> dict[str, list[str]]:
    assert taskset.problem is None, taskset.problem
    return {split.name: list(split.files) for split in taskset.splits}


def test_held_out_files_named_as_the_hub_names_them_are_not_train(hub: FakeHub, tmp_path: Path) -> None:
    row = [{"prompt": "2+2", "answer": 4}]
    hub.add_dataset(
        "alice/named",
        files={
            "README.md": "# Named splits\n",
            "train.jsonl": jsonl(row * 3),
            "val.jsonl": jsonl(row * 2),
            "testing.csv": "prompt,answer\n2+2,4\n",
            "evaluation.parquet": parquet(row),
            "test2.jsonl": jsonl(row),
        },
    )

    taskset = read(hub, tmp_path, "alice/named")

    assert files_by_split(taskset) == {
        "train": ["train.jsonl"],
        "validation": ["val.jsonl"],
        "test": ["test2.jsonl", "testing.csv", "evaluation.parquet"],
    }
    assert {split.name: split.rows for split in taskset.splits} == {"train": 3, "validation": 2, "test": 3}


def test_split_folders_and_sharded_files_and_files_the_viewer_leaves_out(hub: FakeHub, tmp_path: Path) -> None:
    row = [{"prompt": "2+2"}]
    hub.add_dataset("alice/folders", files={"data/training/part-0.jsonl": jsonl(row), "data/dev/0.jsonl": jsonl(row)})
    hub.add_dataset(
        "alice/sharded",
        files={
            "data/train-00000-of-00002.parquet": parquet(row),
            "data/train-00001-of-00002.parquet": parquet(row),
            "data/random-00000-of-00001.parquet": parquet(row),
            "extra.jsonl": jsonl(row),  # not a shard: the viewer shows it in no split
        },
    )

    assert files_by_split(read(hub, tmp_path, "alice/folders")) == {
        "train": ["data/training/part-0.jsonl"],
        "validation": ["data/dev/0.jsonl"],
    }
    assert files_by_split(read(hub, tmp_path, "alice/sharded")) == {
        "train": ["data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"],
        "random": ["data/random-00000-of-00001.parquet"],
    }


def test_a_cards_configs_name_the_splits_and_their_files(hub: FakeHub, tmp_path: Path) -> None:
    row = [{"prompt": "2+2"}]
    hub.add_dataset(
        "alice/configured",
        files={"easy/a.jsonl": jsonl(row), "easy/b.jsonl": jsonl(row), "hard.jsonl": jsonl(row), "test.jsonl": ""},
    )
    card = {
        "configs": [
            {"config_name": "other", "data_files": "test.jsonl"},
            {
                "config_name": "main",
                "default": True,
                "data_files": [{"split": "train", "path": "easy/*.jsonl"}, {"split": "holdout", "path": "hard.jsonl"}],
            },
        ]
    }

    assert files_by_split(read(hub, tmp_path, "alice/configured", card)) == {
        "train": ["easy/a.jsonl", "easy/b.jsonl"],
        "holdout": ["hard.jsonl"],
    }
    broken = read(hub, tmp_path, "alice/configured", {"configs": [{"data_files": "hard.jsonl"}]})
    assert broken.splits == () and broken.problem is not None
    assert "its card's `configs` cannot be read" in broken.problem and "config_name" in broken.problem


def test_csv_rows_come_with_their_columns_types(hub: FakeHub, tmp_path: Path) -> None:
    # 100000 rows (2 MiB) whose `label` is a number until the last row, past the block pyarrow infers types from.
    many = "".join(f"{i},{i % 7},0.5,true,\n" for i in range(100_000)) + "100000,seven,0.5,false,\n"
    hub.add_dataset(
        "alice/typed",
        files={
            "train.csv": 'id,prompt,target,weight,hard,notes\n0,"2+2",4,0.5,true,\n1,"a, b",-1,2,false,"two\nlines"\n',
            "test.csv": "id,label,score,ok,gap\n" + many,
        },
    )
    tasksets = Tasksets(hub.url, None, tmp_path / "cache")
    taskset = tasksets.read("alice/typed", None, {}, reset_key="task")

    assert taskset.problem is None, taskset.problem
    rows = tasksets.rows(taskset, "train", [0, 1])
    assert rows == [
        {"id": 0, "prompt": "2+2", "target": 4, "weight": 0.5, "hard": True, "notes": None},
        {"id": 1, "prompt": "a, b", "target": -1, "weight": 2.0, "hard": False, "notes": "two\nlines"},
    ]
    assert taskset.split("test").rows == 100_001
    first, last = tasksets.rows(taskset, "test", [0, 100_000])
    # A column whose values are not all numbers is text throughout; the others keep their types.
    assert (first["label"], last["label"]) == ("0", "seven")
    assert (first["id"], last["score"], last["ok"], last["gap"]) == (0, 0.5, False, None)


def test_a_jsonl_row_keeps_the_keys_it_was_written_with(hub: FakeHub, tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [{"task": {"level": 1}}, {"task": {"level": 2, "hint": "carry the one"}}]
    hub.add_dataset("alice/ragged", files={"train.jsonl": jsonl(rows)})
    tasksets = Tasksets(hub.url, None, tmp_path / "cache")
    taskset = tasksets.read("alice/ragged", None, {}, reset_key="task")

    assert tasksets.rows(taskset, "train", [0, 1]) == rows
