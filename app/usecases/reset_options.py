"""The options a reset is sent with, from what a visitor typed: a seed, a task of a Task API split, a row of a
linked dataset's split (read off the event loop), and any more options as JSON."""

import asyncio
import json
import random
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from catalog.models import EnvironmentDetail
from catalog.store import find_environment
from catalog.tasksets import Tasksets, dataset_resets, read_linked
from core.errors import InvalidInputError, NotFoundError

DATASET = "dataset:"  # a task choice naming a linked dataset's split: `dataset:<id>:<split>`


def dataset_choice(value: str | None) -> tuple[str, str] | None:
    """The (dataset, split) a task choice names, or None for seeds and Task API splits."""
    if not value or not value.startswith(DATASET):
        return None
    dataset, _, split = value[len(DATASET) :].rpartition(":")
    return dataset, split


def _whole(text: str) -> int | None:
    return int(text.strip()) if text and text.strip() else None


async def reset_options(
    engine: Engine,
    tasksets: Tasksets,
    environment_id: str,
    splits: Sequence[str],
    typed: tuple[str, str | None, str, str],
    client: Callable[[], str],
) -> dict[str, Any]:
    """The options of a reset of `environment_id`, whose server lists the Task API `splits`, from the `typed` seed,
    task choice, task index and more options (JSON). `client` is whom a dataset's downloads count against, asked
    only when one is read. InvalidInputError says which of them is wrong; NotFoundError, that the environment has
    left the catalog."""
    seed, split, index, more = typed
    options: dict[str, Any] = {}
    if more and more.strip():
        try:
            options = json.loads(more)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"the reset options are not valid JSON ({exc.msg})") from exc
        if not isinstance(options, dict):
            raise InvalidInputError("the reset options must be a JSON object")
    if seed and seed.strip() and not seed.strip().isdigit():
        raise InvalidInputError("the seed must be a whole number, 0 or more (or empty for a random one)")
    if index and index.strip() and not index.strip().isdigit():
        raise InvalidInputError("the task index must be a whole number, 0 or more")
    if _whole(seed) is not None:
        options["seed"] = _whole(seed)
    dataset = dataset_choice(split)
    if dataset is not None:
        return options | await dataset_reset(engine, tasksets, environment_id, dataset, _whole(index), options, client)
    if _whole(index) is not None and splits:
        # The Task API lists tasks; environments take the one to play as reset options.
        return options | {"split": split or splits[0], "index": _whole(index)}
    if split and splits:
        options["split"] = split
    return options


async def dataset_reset(
    engine: Engine,
    tasksets: Tasksets,
    environment_id: str,
    dataset: tuple[str, str],
    row: int | None,
    options: dict[str, Any],
    client: Callable[[], str],
) -> dict[str, Any]:
    """The reset options of one row of a linked dataset's (id, split): row `row`, or one drawn from the options'
    seed; its downloads counted against `client`."""
    name, split = dataset

    def read() -> dict[str, Any]:
        counted = client()
        with Session(engine) as session:
            environment: EnvironmentDetail | None = find_environment(session, environment_id)
            if environment is None:
                raise NotFoundError(f"{environment_id} is no longer in the catalog")
            chosen = row
            if chosen is None:
                allowance = tasksets.downloads.allowance(counted)
                rows = read_linked(session, tasksets, environment, name, allowance).split(split).rows
                chosen = random.Random(options.get("seed")).randrange(rows) if rows else 0
            resets, _ = dataset_resets(session, tasksets, environment, name, split, [chosen], counted)
            return resets[0]

    return await asyncio.to_thread(read)
