"""Datasets as tasksets: a dataset linked to an environment, read from the Hub at a pinned revision, gives
splits of rows, and each row the options of one reset.

A row's reset options are its `openenv_reset` column (the field OpenEnv's taskset RFC draft names),
an object or its JSON text; else, when the environment's README front matter names a `reset_key`,
the whole row under that key. Files are the dataset's parquet, JSONL, JSON or CSV data, split as the Hub's
dataset viewer splits them (catalog.splits). A file too large to read here leaves its split's row count
unknown; one that would expand past the bounds of catalog.datafiles once read is its split's problem.
Downloads are capped per request, and per hour for each client, each dataset and envhub in all (files already
on disk are free; catalog.downloads), so a catalog of hostile datasets cannot keep envhub fetching, nor one
client spend the hour for everyone.
"""

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any

import pyarrow as pa
from huggingface_hub import HfApi, RepoFile, try_to_load_from_cache
from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError
from sqlmodel import Session

from catalog.datafiles import count_rows, parse_json, read_rows
from catalog.downloads import Allowance, Downloads
from catalog.models import Dataset, EnvironmentDetail
from catalog.splits import split_files
from core.errors import EnvhubError, HubUnavailableError, InvalidInputError, NotFoundError
from envclient.interface import Interface, Split

__all__ = [
    "RESET_COLUMN",
    "DatasetSplit",
    "DatasetTaskset",
    "EnvironmentTasksets",
    "Tasksets",
    "dataset_resets",
    "environment_tasksets",
    "read_linked",
    "reset_key_of",
    "reset_options",
]

RESET_COLUMN = "openenv_reset"
DATA_SUFFIXES = (".parquet", ".jsonl", ".json", ".csv")
MAX_FILE_BYTES = 64 * 2**20  # larger files are not read here
MAX_SPLIT_BYTES = 128 * 2**20  # a split with more data is previewed, not counted nor played
MAX_FILES = 200  # data files looked at per dataset
MAX_DATASETS = 10  # linked datasets read per environment
PREVIEW_ROWS = 3
PREVIEW_COLUMNS = 50
PREVIEW_VALUE_CHARS = 300
MAX_RESETS_CHARS = 16 * 2**20  # the rows one evaluation plays, as JSON


@dataclass(frozen=True)
class DatasetSplit:
    name: str
    files: tuple[str, ...]
    rows: int | None = None  # None: too large to count here
    preview: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class DatasetTaskset:
    """What one dataset offers to play: its splits at a revision, and how a row becomes a reset."""

    dataset: str
    revision: str
    splits: tuple[DatasetSplit, ...] = ()
    columns: tuple[str, ...] = ()
    resets_by: str | None = None  # how a row becomes reset options; None: it cannot
    problem: str | None = None
    problem_code: str | None = None  # the problem's stable code: an error's (core.errors), or one named here

    def split(self, name: str) -> DatasetSplit:
        for split in self.splits:
            if split.name == name:
                return split
        named = ", ".join(s.name for s in self.splits) or "none"
        raise InvalidInputError(
            f"dataset {self.dataset} has no split {name!r}; its splits are {named}", code="split_unknown"
        )


def reset_options(row: dict[str, Any], reset_key: str | None, max_depth: int = 64) -> dict[str, Any] | None:
    """The reset options one row stands for, or None when it names none; ValueError when its `openenv_reset`
    text nests over `max_depth` deep."""
    value = row.get(RESET_COLUMN)
    if isinstance(value, str):
        try:
            value = parse_json(value, max_depth, f"its `{RESET_COLUMN}`")
        except json.JSONDecodeError:
            value = None
    if isinstance(value, dict):
        return value
    return {reset_key: row} if reset_key else None


def _resets_by(columns: tuple[str, ...], reset_key: str | None) -> str | None:
    if RESET_COLUMN in columns:
        return f"each row's `{RESET_COLUMN}` column, as the reset's options"
    if reset_key:
        return f"each whole row, as the reset option `{reset_key}` (the environment's README names it)"
    return None


def _plain(value: Any) -> Any:
    """A row value as JSON can carry it: bytes and dates as text."""
    return json.loads(json.dumps(value, default=str))


def _shortened(row: dict[str, Any]) -> dict[str, Any]:
    def cut(value: Any) -> Any:
        text = value if isinstance(value, str) else json.dumps(value)
        return value if len(text) <= PREVIEW_VALUE_CHARS else text[:PREVIEW_VALUE_CHARS] + "…"

    return {key: cut(value) for key, value in islice(row.items(), PREVIEW_COLUMNS)}


class Tasksets:
    """Reads linked datasets from the Hub (or anything speaking its API at `endpoint`); a revision read once
    is kept, since a pinned revision never changes."""

    def __init__(
        self,
        endpoint: str,
        token: str | None,
        cache_dir: Path,
        downloads: Downloads | None = None,
        max_json_depth: int = 64,
    ) -> None:
        self._api = HfApi(endpoint=endpoint, token=token or False, library_name="envhub")
        self._cache_dir = cache_dir
        self._read: dict[tuple[str, str], DatasetTaskset] = {}
        self._sizes: dict[tuple[str, str], int] = {}  # (dataset, path) → bytes
        self._lock = threading.Lock()
        self.downloads = downloads or Downloads()
        self.max_json_depth = max_json_depth  # how deep a row may nest: deeper, it could not be served as JSON

    def read(
        self,
        dataset_id: str,
        revision: str | None,
        card: dict[str, Any],
        reset_key: str | None,
        allowance: Allowance | None = None,
    ) -> DatasetTaskset:
        """The dataset's splits, row counts and first rows at `revision` (its current one when None), and
        how its rows reset an environment whose README names `reset_key`; downloads drawn from `allowance`
        (a request's own when None)."""
        revision = revision or self._current(dataset_id)
        with self._lock:
            taskset = self._read.get((dataset_id, revision))
        if taskset is None:
            taskset = self._load(dataset_id, revision, card, allowance or self.downloads.allowance())
            with self._lock:
                self._read[(dataset_id, revision)] = taskset
        resets_by = _resets_by(taskset.columns, reset_key)
        if resets_by is None and taskset.splits and taskset.problem is None:
            problem = (
                f"its rows have no `{RESET_COLUMN}` column and the environment's README names no `reset_key`, "
                "so envhub cannot tell what to reset with"
            )
            return replace(taskset, problem=problem, problem_code="no_reset_column")
        return replace(taskset, resets_by=resets_by)

    def rows(
        self, taskset: DatasetTaskset, split: str, indices: list[int], allowance: Allowance | None = None
    ) -> list[dict[str, Any]]:
        """The rows at `indices` of one of the taskset's splits, in the order asked; together at most
        MAX_RESETS_CHARS of JSON."""
        chosen = taskset.split(split)
        if chosen.rows is None:
            raise InvalidInputError(
                f"{taskset.dataset} split {split} is too large to read here (over {MAX_SPLIT_BYTES // 2**20} MiB, "
                f"or a file over {MAX_FILE_BYTES // 2**20} MiB); play a smaller split"
            )
        last = max(indices)
        if last >= chosen.rows or min(indices) < 0:
            raise InvalidInputError(
                f"{taskset.dataset} split {split} has rows 0 to {chosen.rows - 1}; not {last}", code="row_out_of_range"
            )
        found: dict[int, dict[str, Any]] = {}
        wanted = set(indices)
        held = 0
        rows = self._split_rows(taskset.dataset, taskset.revision, chosen, allowance or self.downloads.allowance())
        try:
            for number, row in enumerate(rows):
                if number in wanted:
                    found[number] = _plain(row)
                    held += len(json.dumps(found[number]))
                    if held > MAX_RESETS_CHARS:
                        raise InvalidInputError(
                            f"the rows asked of {taskset.dataset} split {split} hold over "
                            f"{MAX_RESETS_CHARS // 2**20} MiB; play fewer rows at a time",
                            code="rows_too_large",
                        )
                if number >= last:
                    break
        except (ValueError, pa.ArrowException) as exc:  # past the rows counted and previewed when it was read
            message = f"{taskset.dataset} split {split} could not be read up to row {last}: {exc}"
            raise InvalidInputError(message, code="unreadable_split") from exc
        return [found[i] for i in indices]

    def _current(self, dataset_id: str) -> str:
        try:
            sha = self._api.dataset_info(dataset_id).sha
        except (RepositoryNotFoundError, RevisionNotFoundError) as exc:
            raise NotFoundError(f"dataset {dataset_id} is not on the Hub (or is private)") from exc
        except (HfHubHTTPError, OSError) as exc:
            raise HubUnavailableError(f"could not read dataset {dataset_id} from the Hub: {exc}") from exc
        if not sha:
            raise HubUnavailableError(f"the Hub gave no revision for dataset {dataset_id}; try again")
        return sha

    def _download(self, dataset_id: str, revision: str, path: str, allowance: Allowance) -> Path:
        cached = try_to_load_from_cache(
            dataset_id, path, cache_dir=self._cache_dir, revision=revision, repo_type="dataset"
        )
        if isinstance(cached, str):
            return Path(cached)
        self.downloads.draw(allowance, dataset_id)
        try:
            return Path(
                self._api.hf_hub_download(
                    dataset_id, path, repo_type="dataset", revision=revision, cache_dir=self._cache_dir
                )
            )
        except EntryNotFoundError as exc:
            raise NotFoundError(f"{path} is not in dataset {dataset_id} at {revision[:12]}") from exc
        except (HfHubHTTPError, OSError) as exc:
            raise HubUnavailableError(f"could not download {path} of dataset {dataset_id}: {exc}") from exc

    def _data_files(self, dataset_id: str, revision: str) -> dict[str, int]:
        """The dataset's data files at `revision`, with their sizes."""
        try:
            listed = list(self._api.list_repo_tree(dataset_id, repo_type="dataset", revision=revision, recursive=True))
        except (RepositoryNotFoundError, RevisionNotFoundError) as exc:
            raise NotFoundError(f"dataset {dataset_id} has no revision {revision[:12]} on the Hub") from exc
        except (HfHubHTTPError, OSError) as exc:
            raise HubUnavailableError(f"could not list dataset {dataset_id}'s files on the Hub: {exc}") from exc
        files = {
            entry.path: int(entry.size)
            for entry in listed
            if isinstance(entry, RepoFile)
            and entry.path.lower().endswith(DATA_SUFFIXES)
            and not any(part.startswith(".") for part in entry.path.split("/"))
        }
        return {path: files[path] for path in sorted(files)[:MAX_FILES]}

    def _load(self, dataset_id: str, revision: str, card: dict[str, Any], allowance: Allowance) -> DatasetTaskset:
        sizes = self._data_files(dataset_id, revision)
        if not sizes:
            problem = "it holds no parquet, JSONL, JSON or CSV files"
            return DatasetTaskset(dataset_id, revision, problem=problem, problem_code="no_data_files")
        with self._lock:
            self._sizes.update({(dataset_id, path): size for path, size in sizes.items()})
        try:
            grouped = split_files(card, list(sizes))
        except ValueError as exc:
            problem = f"its card's `configs` cannot be read: {exc}"
            return DatasetTaskset(dataset_id, revision, problem=problem, problem_code="unreadable_configs")
        if not grouped:
            problem = "none of its data files is in a split: its card's `configs` name data_files that match none"
            return DatasetTaskset(dataset_id, revision, problem=problem, problem_code="no_split_files")
        splits, columns, problems = [], [], []
        for name, files in grouped.items():
            split = DatasetSplit(name, tuple(files))
            try:
                small = (
                    all(sizes[f] <= MAX_FILE_BYTES for f in files) and sum(sizes[f] for f in files) <= MAX_SPLIT_BYTES
                )
                rows = sum(self._count(dataset_id, revision, f, allowance) for f in files) if small else None
                first = [
                    _shortened(_plain(row))
                    for row in islice(self._split_rows(dataset_id, revision, split, allowance), PREVIEW_ROWS)
                ]
            except (ValueError, pa.ArrowException) as exc:
                problems.append(f"split {name} could not be read: {exc}")
                continue
            columns += [c for row in first for c in row if c not in columns]
            splits.append(DatasetSplit(name, tuple(files), rows, tuple(first)))
        return DatasetTaskset(
            dataset_id,
            revision,
            tuple(splits),
            tuple(columns),
            problem="; ".join(problems) or None,
            problem_code="unreadable_split" if problems else None,
        )

    def _count(self, dataset_id: str, revision: str, path: str, allowance: Allowance) -> int:
        try:
            return count_rows(self._download(dataset_id, revision, path, allowance), self.max_json_depth)
        except (ValueError, pa.ArrowException) as exc:
            raise ValueError(f"{path}: {exc}") from exc

    def _split_rows(
        self, dataset_id: str, revision: str, split: DatasetSplit, allowance: Allowance
    ) -> Iterator[dict[str, Any]]:
        """The split's rows in order, from its files small enough to read here."""
        for path in split.files:
            with self._lock:
                size = self._sizes.get((dataset_id, path), 0)
            if size > MAX_FILE_BYTES:
                return
            try:
                yield from read_rows(self._download(dataset_id, revision, path, allowance), self.max_json_depth)
            except (ValueError, pa.ArrowException) as exc:
                raise ValueError(f"{path}: {exc}") from exc


@dataclass(frozen=True)
class EnvironmentTasksets:
    """What an environment can be evaluated on: its Task API splits and its linked datasets."""

    environment: str
    takes_tasks: bool
    task_api: tuple[Split, ...] = ()
    datasets: tuple[DatasetTaskset, ...] = ()
    reset_key: str | None = None
    note: str | None = None  # what is unknown, and how to learn it


def reset_key_of(environment: EnvironmentDetail) -> str | None:
    """The reset option a dataset row goes under, as the README's front matter names it (`reset_key`)."""
    key = environment.card.get("reset_key")
    return key if isinstance(key, str) and key else None


def read_linked(
    session: Session,
    tasksets: Tasksets,
    environment: EnvironmentDetail,
    dataset_id: str,
    allowance: Allowance | None = None,
) -> DatasetTaskset:
    """One of the environment's linked datasets, at the revision the catalog last synced."""
    if dataset_id not in environment.datasets:
        linked = ", ".join(environment.datasets) or "none"
        raise InvalidInputError(
            f"{environment.id} is not linked to dataset {dataset_id}; its datasets are {linked}",
            code="dataset_not_linked",
        )
    row = session.get(Dataset, dataset_id)
    revision, card = (row.sha, row.card) if row is not None else (None, {})
    return tasksets.read(dataset_id, revision, card, reset_key_of(environment), allowance)


def environment_tasksets(
    session: Session, tasksets: Tasksets, environment: EnvironmentDetail, interface: Interface, client: str | None
) -> EnvironmentTasksets:
    """Read every linked dataset (a failure is that dataset's problem, not the answer's) beside the Task API
    splits `interface` lists; what is downloaded counts against `client`."""
    datasets = []
    allowance = tasksets.downloads.allowance(client)
    for dataset_id in environment.datasets[:MAX_DATASETS]:
        try:
            datasets.append(read_linked(session, tasksets, environment, dataset_id, allowance))
        except EnvhubError as exc:
            datasets.append(DatasetTaskset(dataset_id, "", problem=exc.message, problem_code=exc.code))
    takes = bool(interface.splits) or any(d.resets_by for d in datasets)
    note = None
    if not takes:
        note = (
            "It takes no tasks: its server lists no Task API splits and no linked dataset can reset it. "
            "Evaluate it on seeds."
        )
        if interface.schema is None:
            note += " Launch it (or connect to a running one) to read its Task API."
    return EnvironmentTasksets(
        environment.id, takes, interface.splits, tuple(datasets), reset_key_of(environment), note
    )


def dataset_resets(
    session: Session,
    tasksets: Tasksets,
    environment: EnvironmentDetail,
    dataset_id: str,
    split: str,
    indices: list[int],
    client: str | None,
) -> tuple[list[dict[str, Any]], str]:
    """The reset options of rows `indices` of a linked dataset's split, and the revision they were read at; what
    is downloaded counts against `client` (None: nobody in particular)."""
    allowance = tasksets.downloads.allowance(client)
    taskset = read_linked(session, tasksets, environment, dataset_id, allowance)
    if taskset.resets_by is None:
        raise InvalidInputError(
            f"dataset {dataset_id} cannot reset {environment.id}: {taskset.problem}", code="dataset_cannot_reset"
        )
    resets = []
    for index, row in zip(indices, tasksets.rows(taskset, split, indices, allowance), strict=True):
        try:
            options = reset_options(row, reset_key_of(environment), tasksets.max_json_depth)
        except ValueError as exc:
            raise InvalidInputError(
                f"row {index} of {dataset_id} split {split}: {exc}", code="nested_too_deep"
            ) from exc
        if options is None:
            raise InvalidInputError(f"row {index} of {dataset_id} split {split} has no `{RESET_COLUMN}` object")
        resets.append(options)
    return resets, taskset.revision
