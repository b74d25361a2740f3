"""Which of a dataset's data files make up which split, by the rules of the Hub's dataset viewer: the `datasets`
library's own resolution, run over the file list envhub read from the Hub.

A card's `configs` (its default config, else its first) name each split's `data_files` patterns, under its
`data_dir`; without them the library's default patterns apply: sharded names (`data/train-00000-of-00002.parquet`),
then split keywords in folder names, then in file names (`val.jsonl`, `testing.csv`, `evaluation.parquet`,
`test2.jsonl`), else every file is `train`. The library resolves patterns on a filesystem, so the repo's paths are
laid out as empty files in a scratch folder, which nothing reads.
"""

import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ["split_files"]


def split_files(card: dict[str, Any], paths: list[str]) -> dict[str, list[str]]:
    """The data files of each split, in the viewer's order of splits; ValueError naming what is wrong with the
    card's `configs` when the viewer would refuse them."""
    # Imported here: `datasets` takes a second to import, and only a taskset read needs it.
    from datasets.data_files import (  # type: ignore[import-untyped]
        EmptyDatasetError,
        get_data_patterns,
        resolve_pattern,
        sanitize_patterns,
    )
    from datasets.utils.metadata import MetadataConfigs  # type: ignore[import-untyped]

    config = _chosen_config(MetadataConfigs.from_dataset_card_data(card) if card.get("configs") else {})
    with tempfile.TemporaryDirectory(prefix="envhub-splits-") as scratch:
        root = Path(scratch)
        for path in paths:
            if not _inside(path):
                continue
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).touch()
        base = root / str(config.get("data_dir") or "")
        try:
            if config.get("data_files") is not None:
                patterns = sanitize_patterns(config["data_files"])
            else:
                patterns = get_data_patterns(base.as_posix())
        except EmptyDatasetError:
            return {}
        splits: dict[str, list[str]] = {}
        for split, split_patterns in patterns.items():
            found: dict[str, None] = {}
            for pattern in split_patterns:
                try:
                    matched = resolve_pattern(str(pattern), base_path=base.as_posix())
                except FileNotFoundError:
                    continue  # a pattern that matches nothing leaves its split with the others' files
                found |= dict.fromkeys(Path(m).relative_to(root).as_posix() for m in matched)
            if found:
                splits[str(split)] = list(found)
        return splits


def _chosen_config(configs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The config the viewer shows first: the one marked `default: true` or named `default`, else the first."""
    if not configs:
        return {}
    for name, config in configs.items():
        if name == "default" or config.get("default"):
            return config
    return next(iter(configs.values()))


def _inside(path: str) -> bool:
    """A repo path that stays in the repo (the Hub never lists another, but the list is the Hub's word)."""
    parts = PurePosixPath(path).parts
    return bool(parts) and not PurePosixPath(path).is_absolute() and ".." not in parts
