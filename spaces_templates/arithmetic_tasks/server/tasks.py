"""The bundled task splits, read once from the JSONL files in dataset/."""

import functools
import json
import re
from pathlib import Path

from models import ArithmeticTask

DATASET = Path(__file__).resolve().parent.parent / "dataset"
SPLITS = ("train", "test")
INTEGER = re.compile(r"[+-]?\d+")


class UnknownSplitError(ValueError):
    """A split name that is not bundled."""

    def __init__(self, split: object) -> None:
        super().__init__(f"unknown split {split!r}; the splits are {', '.join(SPLITS)}")


def load_split(split: str) -> tuple[ArithmeticTask, ...]:
    if split not in SPLITS:
        raise UnknownSplitError(split)
    return _read_split(split)


@functools.cache
def _read_split(split: str) -> tuple[ArithmeticTask, ...]:
    lines = (DATASET / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
    return tuple(ArithmeticTask.model_validate(json.loads(line)) for line in lines if line.strip())


def get_task(split: str, index: int) -> ArithmeticTask:
    """The task at index; raises IndexError, which openenv's Task API answers with 400, when out of range."""
    tasks = load_split(split)
    if not 0 <= index < len(tasks):
        raise IndexError(f"task index {index} is out of range for split {split!r} ({len(tasks)} tasks)")
    return tasks[index]


def parse_integer(answer: str) -> int | None:
    """The integer an answer states, ignoring spaces and thousands separators; None if it states none."""
    text = re.sub(r"[\s,_]", "", answer)
    return int(text) if INTEGER.fullmatch(text) else None
