"""Reading a dataset's data files (parquet, JSONL, JSON, CSV) row by row, within bounds that hold whatever the
file says about itself.

Limits on a file's size on disk say nothing of what it holds once read: a parquet file of a few KiB can
expand to gigabytes (a long string in a dictionary page, referenced by every row; or one huge value
compressed to nothing). So a parquet file's metadata is checked before any of its data is read (its
uncompressed size in total and per column of a row group), its rows are read a few at a time with
dictionaries kept as such, and each batch's size as it would be read out is measured before any of it
becomes Python values. JSONL is read a line at a time, with a bound on a line; CSV by pyarrow, a block of at
most a row's bound at a time (a longer row is refused), its columns typed as pyarrow infers them (numbers,
booleans, dates and nulls, not text). A row may nest arrays and objects only so deep (a caller's bound): JSON
nested deeper than Python's own limit cannot even be parsed, and less deep still it cannot be served as JSON.
Every bound that is passed is a `ValueError` naming the file's problem and what to do.
"""

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv
import pyarrow.parquet as pq

__all__ = [
    "BATCH_ROWS",
    "MAX_CHUNK_BYTES",
    "MAX_JSON_BYTES",
    "MAX_ROW_BYTES",
    "MAX_UNCOMPRESSED_BYTES",
    "MAX_VALUE_BYTES",
    "count_rows",
    "nesting",
    "parse_json",
    "read_rows",
]

MIB = 2**20
MAX_UNCOMPRESSED_BYTES = 512 * MIB  # a parquet file's data, decompressed
MAX_CHUNK_BYTES = 16 * MIB  # one column of one row group, decompressed: what one value can be at most
MAX_FOOTER_BYTES = 4 * MIB  # a parquet file's metadata
MAX_VALUE_BYTES = 1 * MIB  # one value (a cell), as read out
MAX_ROW_BYTES = 1 * MIB  # one row of a text format; a parquet batch holds BATCH_ROWS times this at most
BATCH_ROWS = 16  # parquet rows read at a time
MAX_JSON_BYTES = 4 * MIB  # a .json file is parsed whole; larger ones go as JSONL or parquet
_READ_BUFFER = 1 * MIB  # parquet column data is read through a buffer this size, not whole


def _mib(size: int) -> str:
    return f"{size / MIB:.0f} MiB" if size >= MIB else f"{size / 1024:.0f} KiB"


def _check_parquet(path: Path) -> pq.ParquetFile:
    """The parquet file, once its metadata shows it within the bounds; ValueError naming the bound it passes."""
    size = path.stat().st_size
    with path.open("rb") as raw:
        raw.seek(max(size - 8, 0))
        tail = raw.read(8)
    if len(tail) < 8 or tail[4:] != b"PAR1":
        raise ValueError("it is not a parquet file (no PAR1 footer)")
    footer = int.from_bytes(tail[:4], "little")
    if footer > MAX_FOOTER_BYTES:
        raise ValueError(f"its metadata is {_mib(footer)}, over the {_mib(MAX_FOOTER_BYTES)} envhub reads")
    parquet = pq.ParquetFile(path, buffer_size=_READ_BUFFER)
    metadata = parquet.metadata
    total = 0
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        total += group.total_byte_size
        for column in range(group.num_columns):
            chunk = group.column(column)
            if chunk.total_uncompressed_size > MAX_CHUNK_BYTES:
                raise ValueError(
                    f"column {chunk.path_in_schema} of row group {index} decompresses to "
                    f"{_mib(chunk.total_uncompressed_size)}, over the {_mib(MAX_CHUNK_BYTES)} envhub reads of one "
                    "column of a row group: write it with smaller row groups (pyarrow's row_group_size) or "
                    "smaller values"
                )
    if total > MAX_UNCOMPRESSED_BYTES:
        raise ValueError(
            f"it decompresses to {_mib(total)}, over the {_mib(MAX_UNCOMPRESSED_BYTES)} envhub reads of one file: "
            "split it into smaller files"
        )
    # Strings and bytes stay dictionary-encoded as read: a value repeated by every row is held once.
    byte_arrays = [
        parquet.schema.column(i).path
        for i in range(len(parquet.schema))
        if parquet.schema.column(i).physical_type == "BYTE_ARRAY"
    ]
    return pq.ParquetFile(path, buffer_size=_READ_BUFFER, read_dictionary=byte_arrays)


_BYTE_TYPES = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)


def _lengths(array: pa.Array) -> tuple[int, int]:
    """The bytes an Arrow array holds once read out of its dictionaries, and its largest value's."""
    if isinstance(array, pa.DictionaryArray):
        lengths = pc.fill_null(pc.binary_length(array.dictionary), 0)
        taken = pc.take(lengths, pc.fill_null(array.indices, 0))
        return int(pc.sum(taken).as_py() or 0), int(pc.max(taken).as_py() or 0)
    kind = array.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _lengths(array.flatten())
    if pa.types.is_map(kind):
        keys, items = _lengths(array.keys), _lengths(array.items)
        return keys[0] + items[0], max(keys[1], items[1])
    if pa.types.is_struct(kind):
        fields = [_lengths(child) for child in array.flatten()]
        return sum(f[0] for f in fields), max((f[1] for f in fields), default=0)
    if any(test(kind) for test in _BYTE_TYPES):
        lengths = pc.binary_length(array)
        return int(pc.sum(lengths).as_py() or 0), int(pc.max(lengths).as_py() or 0)
    return array.nbytes, array.nbytes // max(len(array), 1)


def _parquet_rows(path: Path) -> Iterator[dict[str, object]]:
    parquet = _check_parquet(path)
    start = 0
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
        total = 0
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            held, largest = _lengths(column)
            if largest > MAX_VALUE_BYTES:
                raise ValueError(
                    f"column {name} holds a value of {_mib(largest)} in rows {start}-{start + batch.num_rows - 1}, "
                    f"over the {_mib(MAX_VALUE_BYTES)} envhub reads of one value"
                )
            total += held
        if total > BATCH_ROWS * MAX_ROW_BYTES:
            raise ValueError(
                f"rows {start}-{start + batch.num_rows - 1} hold {_mib(total)} once read, over the "
                f"{_mib(MAX_ROW_BYTES)} a row envhub reads"
            )
        start += batch.num_rows
        yield from batch.to_pylist()


class _Lines:
    """A text file's lines, refusing a line over MAX_ROW_BYTES."""

    def __init__(self, text: IO[str]) -> None:
        self._text = text
        self.row_chars = 0  # of the row being read; the reader sets it back to 0 at each row

    def __iter__(self) -> Iterator[str]:
        while line := self._text.readline(MAX_ROW_BYTES + 1):
            self.row_chars += len(line)
            if self.row_chars > MAX_ROW_BYTES:
                raise ValueError(f"a row is over {_mib(MAX_ROW_BYTES)}, the most envhub reads of one row")
            yield line


def nesting(value: object) -> int:
    """How deep a value's lists and dicts nest (a scalar: 0), found without recursion."""
    deepest, level = 0, [(value, 1)]
    while level:
        item, depth = level.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, depth)
            level.extend((child, depth + 1) for child in children)
    return deepest


def parse_json(text: str, max_depth: int, what: str) -> object:
    """JSON text nested at most `max_depth` deep; ValueError, naming `what`, when it is not."""
    try:
        value = json.loads(text)
    except RecursionError:
        value = None  # nested deeper than Python parses, so deeper than any bound
        depth = max_depth + 1
    else:
        depth = nesting(value)
    if depth > max_depth:
        raise ValueError(
            f"{what} nests arrays and objects over {max_depth} deep, the most envhub reads "
            "(ENVHUB_TASKSET_MAX_JSON_DEPTH)"
        )
    return value


def _jsonl_rows(path: Path, max_depth: int) -> Iterator[dict[str, object]]:
    with path.open(encoding="utf-8") as text:
        lines = _Lines(text)
        for number, line in enumerate(lines, 1):
            lines.row_chars = 0
            if line.strip():
                row = parse_json(line, max_depth, f"line {number}")
                if not isinstance(row, dict):
                    raise ValueError(f"line {number} is not a JSON object")
                yield row


_CSV_READ = pv.ReadOptions(block_size=MAX_ROW_BYTES)  # a batch is read from at most this much text
_CSV_PARSE = pv.ParseOptions(newlines_in_values=True)  # a quoted value may hold line breaks
_CSV_RETYPINGS = 3  # columns found to change type before all are read as text
_CONVERSION = re.compile(r"In CSV column #(\d+): CSV conversion error")


def _csv_batches(path: Path, types: dict[str, pa.DataType]) -> Iterator[pa.RecordBatch]:
    """The CSV file's rows in batches, with the columns' types as pyarrow infers them from its first batch
    (numbers, booleans, dates; empty and NA values null) unless `types` names them."""
    try:
        convert = pv.ConvertOptions(column_types=types, strings_can_be_null=True)  # an empty cell is null
        reader = pv.open_csv(path, _CSV_READ, _CSV_PARSE, convert)
        yield from reader
    except pa.ArrowInvalid as exc:
        if "straddl" in str(exc):  # a row longer than a block
            raise ValueError(f"a row is over {_mib(MAX_ROW_BYTES)}, the most envhub reads of one row") from exc
        if str(exc).startswith("Empty CSV file"):
            return
        raise


def _csv_types(path: Path) -> dict[str, pa.DataType]:
    """Column types that hold every value of the file: a column whose later values do not fit the type its
    first batch gave it is read as text (and, past a few such columns, every column is)."""
    types: dict[str, pa.DataType] = {}
    for _ in range(_CSV_RETYPINGS):
        names: list[str] = []
        try:
            for batch in _csv_batches(path, types):
                names = names or batch.schema.names
            return types
        except pa.ArrowInvalid as exc:
            changed = _CONVERSION.match(str(exc))
            if changed is None or not names:
                raise
            types[names[int(changed.group(1))]] = pa.string()
    header = next(_csv_batches(path, {}), None)
    return {name: pa.string() for name in header.schema.names} if header is not None else {}


def _csv_rows(path: Path) -> Iterator[dict[str, object]]:
    for batch in _csv_batches(path, _csv_types(path)):
        yield from batch.to_pylist()


def _json_rows(path: Path, max_depth: int) -> Iterator[dict[str, object]]:
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        raise ValueError(
            f"a .json file is read whole, and this one is {_mib(size)}, over {_mib(MAX_JSON_BYTES)}: "
            "publish it as JSONL or parquet"
        )
    data = parse_json(path.read_text(encoding="utf-8"), max_depth + 2, "the file")  # {"data": [row, ...]}
    data = data.get("data", data) if isinstance(data, dict) else data
    if not isinstance(data, list):
        raise ValueError("holds neither a list of rows nor {'data': [...]}")
    yield from _nested_within((row for row in data if isinstance(row, dict)), max_depth)


def read_rows(path: Path, max_depth: int) -> Iterator[dict[str, object]]:
    """The rows of one data file, in order, each nested at most `max_depth` deep; ValueError (or an
    ArrowException) when it cannot be read within the bounds."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _jsonl_rows(path, max_depth)
    if suffix == ".json":
        return _json_rows(path, max_depth)
    return _nested_within(_parquet_rows(path) if suffix == ".parquet" else _csv_rows(path), max_depth)


def _nested_within(rows: Iterator[dict[str, object]], max_depth: int) -> Iterator[dict[str, object]]:
    """The rows, refusing one nested over `max_depth` (a parquet file's lists and structs nest too)."""
    for number, row in enumerate(rows):
        if nesting(row) > max_depth:
            raise ValueError(
                f"row {number} nests lists and objects over {max_depth} deep, the most envhub reads "
                "(ENVHUB_TASKSET_MAX_JSON_DEPTH)"
            )
        yield row


def count_rows(path: Path, max_depth: int) -> int:
    """How many rows the file holds: a parquet file's from its metadata, once that is within the bounds."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return int(_check_parquet(path).metadata.num_rows)
    if suffix == ".csv":
        return sum(batch.num_rows for batch in _csv_batches(path, _csv_types(path)))
    return sum(1 for _ in read_rows(path, max_depth))
