"""Boards found in an observation, drawn as boards: a chess position from its FEN, wordle guesses as coloured tiles,
and grids (a list of lists, or a text grid of a few symbols) as cells: discs for connect four, lights for lights-out,
walls and floor for a maze. The observation's own fields are searched (and its metadata, where some environments put
their board); what is not recognised stays text. A grid the action plays (a row and a column, or a column) is drawn
as buttons that send it."""

import html
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_SIDE = 64  # cells a grid may have per side to be drawn
_FEN = re.compile(
    r"^(?:[pnbrqkPNBRQK1-8]{1,8}/){7}[pnbrqkPNBRQK1-8]{1,8}(?: [wb](?: [KQkq-]+ [a-h1-8-]+(?: \d+ \d+)?)?)?$"
)
_PIECES = dict(zip("KQRBNPkqrbnp", "♔♕♖♗♘♙♚♛♜♝♞♟", strict=True))
_FEEDBACK = {"green": "green", "g": "green", "yellow": "yellow", "y": "yellow", "gray": "gray", "grey": "gray"}
_FEEDBACK |= {"-": "gray", "b": "gray", "black": "gray", "x": "gray", "absent": "gray", "present": "yellow"}
_FEEDBACK |= {"correct": "green"}
_MAZE_SYMBOLS = {"#": "wall", ".": "floor", " ": "floor", "A": "agent", "E": "exit", "S": "start", "G": "exit"}
_POSITION_KEYS = ("position", "current_position", "agent", "agent_position", "player")
_EXIT_KEYS = ("exit", "exit_cell", "goal", "target")


@dataclass(frozen=True)
class Clicks:
    """What a click on a drawn grid sends: the action fields its column and its row fill (no row: a column alone)."""

    column: str
    row: str | None = None


@dataclass(frozen=True)
class Hints:
    """What the environment's schemas tell of its boards: how a click plays one, and each observation field's
    description (a legend's names: '0 empty, 1 you, 2 opponent')."""

    clicks: Clicks | None = None
    descriptions: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Board:
    """A board found in the field `field`, and its HTML (every value in it escaped)."""

    field: str
    html: str


def find_board(observation: dict[str, Any], hints: Hints | None = None) -> Board | None:
    """The first board in the observation's fields (then its metadata's), or None."""
    for name, value, where in _fields(observation):
        board = _chess(name, value) or _wordle(name, value, where) or _grid(name, value, where, hints or Hints())
        if board is not None:
            return board
    return None


def _fields(observation: dict[str, Any]) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """(name, value, the dict it is in): the observation's own fields first, then its metadata's."""
    for key, value in observation.items():
        if key != "metadata":
            yield key, value, observation
    metadata = observation.get("metadata")
    if isinstance(metadata, dict):
        for key, value in metadata.items():
            yield key, value, metadata | {k: v for k, v in observation.items() if k not in metadata}


# -- chess


def _chess(field: str, value: Any) -> Board | None:
    if not isinstance(value, str) or not _FEN.match(value.strip()):
        return None
    placement, *rest = value.strip().split(" ")
    rows = []
    for rank, row in zip(range(8, 0, -1), placement.split("/"), strict=True):
        squares = []
        for char in row:
            squares.extend([""] * int(char) if char.isdigit() else [char])
        if len(squares) != 8:
            return None
        cells = "".join(
            f'<span class="sq {"dark" if (rank + file) % 2 else "light"}"'
            + (f' data-piece="{html.escape(piece)}"' if piece else "")
            + f">{_PIECES.get(piece, '')}</span>"
            for file, piece in enumerate(squares)
        )
        rows.append(f'<span class="rank">{rank}</span>{cells}')
    files = '<span class="rank"></span>' + "".join(f'<span class="file">{f}</span>' for f in "abcdefgh")
    to_move = {"w": "White to move", "b": "Black to move"}.get(rest[0], "") if rest else ""
    return Board(
        field,
        f'<div class="board board-chess" role="img" aria-label="chess position {html.escape(value.strip())}">'
        f"{''.join(rows)}{files}</div>" + (f'<p class="board-note">{to_move}</p>' if to_move else ""),
    )


# -- wordle


def _colors(guess: dict[str, Any]) -> list[str] | None:
    word = guess.get("word") or guess.get("guess")
    if not isinstance(word, str) or not word:
        return None
    for key in ("colors", "feedback", "pattern", "result", "marks"):
        marks = guess.get(key)
        listed = list(marks) if isinstance(marks, str | list) else None
        if listed and len(listed) == len(word):
            named = [_FEEDBACK.get(str(m).lower()) for m in listed]
            if all(named):
                return [str(n) for n in named]
    return None


WORD_LENGTH = 5  # the rows drawn before the first guess says how long words are


def _wordle(field: str, value: Any, where: dict[str, Any]) -> Board | None:
    left = where.get("guesses_left")
    if value == [] and field == "guesses" and isinstance(left, int) and 0 < left <= 20:  # a game not begun yet
        row = f'<div class="tiles empty">{"<span class=tile></span>" * WORD_LENGTH}</div>'
        return Board(field, f'<div class="board board-wordle">{row * left}</div>')
    if not isinstance(value, list) or not value or not all(isinstance(g, dict) for g in value):
        return None
    rows = []
    for guess in value:
        colors = _colors(guess)
        if colors is None:
            return None
        word = str(guess.get("word") or guess.get("guess"))
        tiles = "".join(
            f'<span class="tile {color}">{html.escape(letter.upper())}</span>'
            for letter, color in zip(word, colors, strict=True)
        )
        rows.append(f'<div class="tiles" data-word="{html.escape(word.lower(), quote=True)}">{tiles}</div>')
    width = len(str(value[-1].get("word") or value[-1].get("guess")))
    if isinstance(left, int) and 0 < left <= 20:
        rows += [f'<div class="tiles empty">{"<span class=tile></span>" * width}</div>'] * left
    return Board(field, f'<div class="board board-wordle">{"".join(rows)}{_keyboard(where.get("letters"))}</div>')


def _keyboard(letters: Any) -> str:
    """The letters guessed so far, in their best colour."""
    if not isinstance(letters, dict) or not letters:
        return ""
    keys = "".join(
        f'<span class="key {_FEEDBACK.get(str(color).lower(), "")}">{html.escape(str(letter).upper())}</span>'
        for letter, color in sorted(letters.items())
    )
    return f'<div class="keys">{keys}</div>'


# -- grids


def _rectangular(value: Any) -> list[list[Any]] | None:
    if not isinstance(value, list) or not value or len(value) > MAX_SIDE:
        return None
    if not all(isinstance(row, list) and row for row in value):
        return None
    width = len(value[0])
    if width > MAX_SIDE or any(len(row) != width for row in value):
        return None
    return value if all(_is_cell(c) for row in value for c in row) else None


def _is_cell(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 2)


def _text_grid(value: Any) -> list[list[str]] | None:
    """A multi-line string of equal lines made of a few maze symbols: '#' walls, '.' floor, 'A' agent, 'E' exit."""
    if not isinstance(value, str) or "\n" not in value.strip("\n"):
        return None
    lines = value.strip("\n").split("\n")
    if len(lines) < 3 or len(lines) > MAX_SIDE or len({len(line) for line in lines}) != 1 or len(lines[0]) > MAX_SIDE:
        return None
    symbols = set("".join(lines))
    if not symbols <= set(_MAZE_SYMBOLS) or "#" not in symbols:
        return None
    return [list(line) for line in lines]


def _cell_at(where: dict[str, Any], keys: Sequence[str], grid: list[list[Any]], wall: Any) -> tuple[int, int] | None:
    """A [row, column] (or [column, row]) a field names, ordered so that it falls on the grid and not on a wall."""
    for key in keys:
        value = where.get(key)
        if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, int) for v in value):
            a, b = int(value[0]), int(value[1])
            for row, col in ((a, b), (b, a)):
                if 0 <= row < len(grid) and 0 <= col < len(grid[0]) and grid[row][col] != wall:
                    return row, col
    return None


def _grid(field: str, value: Any, where: dict[str, Any], hints: Hints) -> Board | None:
    text = _text_grid(value)
    clicks = hints.clicks
    if text is not None:
        cells = [[_MAZE_SYMBOLS[c] for c in row] for row in text]
        return Board(field, _cells_html(cells, "board-maze", clicks))
    grid = _rectangular(value)
    if grid is None or not any(word in field.lower() for word in ("board", "grid", "maze", "cells", "map", "lights")):
        return None
    values = {c for row in grid for c in row}
    if "maze" in field.lower() and values <= {0, 1}:
        cells = [["wall" if c == 1 else "floor" for c in row] for row in grid]
        for keys, kind in ((_EXIT_KEYS, "exit"), (_POSITION_KEYS, "agent")):
            at = _cell_at(where, keys, grid, 1)
            if at is not None:
                cells[at[0]][at[1]] = kind
        return Board(field, _cells_html(cells, "board-maze", clicks))
    if all(isinstance(c, bool) for c in values) or (values <= {0, 1} and (len(grid), len(grid[0])) != (6, 7)):
        cells = [["lit" if c else "unlit" for c in row] for row in grid]
        return Board(field, _cells_html(cells, "board-lights", clicks))
    if values <= {-1, 0, 1, 2}:  # two sides and empty: discs
        sides = {0: "empty", 1: "one", 2: "two", -1: "two"}
        cells = [[sides[int(c)] for c in row] for row in grid]
        legend = _legend(hints.descriptions.get(field, ""), values)
        return Board(field, _cells_html(cells, "board-discs", clicks) + legend)
    palette = {v: f"v{i % 8}" for i, v in enumerate(sorted(values, key=str))}
    return Board(field, _cells_html([[palette[c] for c in row] for row in grid], "board-cells", clicks))


_NAMED_VALUE = re.compile(r"(?<![\w.-])(-?\d)\s*(?:=|:|is|for)?\s*([A-Za-z][A-Za-z ]{0,24}?)\s*(?=[,;.)]|$)")


def _legend(description: str, values: set[Any]) -> str:
    """Which disc is whose, named as the field's description names its values ('1 you, 2 opponent')."""
    named = {int(value): name for value, name in _NAMED_VALUE.findall(description)}
    second = -1 if -1 in values else 2
    sides = [("one", named.get(1, "1")), ("two", named.get(second, str(second)))]
    entries = "".join(
        f'<span class="legend-entry"><span class="swatch {side}"></span>{html.escape(name)}</span>'
        for side, name in sides
    )
    return f'<p class="board-legend" data-legend>{entries}</p>'


def _cells_html(cells: list[list[str]], kind: str, clicks: Clicks | None = None) -> str:
    """The cells as a CSS grid; with `clicks`, each cell a button that sends its row and column, or a row of column
    buttons above cells that send their column on a click."""
    width = len(cells[0])
    size = max(8, min(32, 480 // max(width, len(cells))))
    if clicks is None:
        body = "".join(f'<span class="cell {c}"></span>' for row in cells for c in row)
    elif clicks.row is None:
        body = "".join(
            f'<button type="button" class="drop" data-action="{_action({clicks.column: col})}" '
            f'aria-label="column {col}" title="column {col}">▼</button>'
            for col in range(width)
        ) + "".join(
            f'<span class="cell {c} playable" data-action="{_action({clicks.column: col})}"></span>'
            for row in cells
            for col, c in enumerate(row)
        )
    else:
        body = "".join(
            f'<button type="button" class="cell {c} playable" '
            f'data-action="{_action({clicks.row: r, clicks.column: col})}" '
            f'aria-label="row {r}, column {col}: {c}" title="row {r}, column {col}"></button>'
            for r, row in enumerate(cells)
            for col, c in enumerate(row)
        )
    style = f"grid-template-columns: repeat({width}, {size}px); grid-auto-rows: {size}px"
    return f'<div class="board {kind}" style="{style}" data-rows="{len(cells)}" data-columns="{width}">{body}</div>'


def _action(arguments: dict[str, int]) -> str:
    return html.escape(json.dumps(arguments), quote=True)
