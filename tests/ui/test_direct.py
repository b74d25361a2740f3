"""Direct controls read from the action form: a button per value of a one-choice action (arrow keys for directions),
clicks on a drawn grid for a row and a column or a column alone, a legend naming the discs, and what a click may send
(only the form's own fields, valid)."""

import html
import json
import re
from typing import Any

from app.ui.action_form import FormState
from app.ui.boards import Hints, find_board
from app.ui.direct import board_hints, controls_html, direct_action
from app.ui.forms import form_fields
from envclient.interface import Interface
from tests.ui.schemas import CONNECT_FOUR, MAZE


def form(schema: dict[str, Any], tool: str | None = None) -> FormState:
    return FormState("tool" if tool else "action", tuple(form_fields(schema)), tool)


def integers(*names: str, required: tuple[str, ...] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "integer", "minimum": 0} for name in names},
        "required": list(names if required is None else required),
    }


def actions(markup: str) -> list[Any]:
    return [json.loads(html.unescape(found)) for found in re.findall(r'data-action="([^"]*)"', markup)]


def test_a_one_choice_action_gets_a_button_per_value_and_directions_get_the_arrow_keys() -> None:
    maze = controls_html(form(MAZE))
    assert actions(maze) == [{"direction": d} for d in ("up", "down", "left", "right")]
    assert re.findall(r'data-key="(\w+)"', maze) == ["ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight"]
    assert maze.count('<button type="button"') == 4
    compass = {"type": "object", "properties": {"heading": {"enum": ["north", "east", "south", "west"]}}}
    assert re.findall(r'data-key="(\w+)"', controls_html(form(compass))) == [
        "ArrowUp", "ArrowRight", "ArrowDown", "ArrowLeft"
    ]  # fmt: skip
    colours = {"type": "object", "properties": {"colour": {"enum": ["red", "<b>blue</b>"]}}, "required": ["colour"]}
    drawn = controls_html(form(colours))
    assert actions(drawn) == [{"colour": "red"}, {"colour": "<b>blue</b>"}] and "data-key" not in drawn
    assert "<b>" not in drawn  # values are escaped
    many = {"type": "object", "properties": {"word": {"enum": [f"w{i}" for i in range(40)]}}}
    assert controls_html(form(many)) == ""  # a long menu stays a menu


def test_a_row_and_a_column_over_a_drawn_grid_are_clicks_on_its_cells() -> None:
    lights = [[1, 0], [0, 1]]
    for names, sent in ((("row", "col"), {"row": 1, "col": 0}), (("x", "y"), {"y": 1, "x": 0})):
        hints = board_hints(form(integers(*names)), Interface())
        board = find_board({"board": lights}, hints)
        assert board is not None
        assert actions(board.html)[2] == sent  # row-major: the third cell is row 1, column 0
        assert board.html.count("<button") == 4 and 'aria-label="row 1, column 0: unlit"' in board.html
    assert "Click a cell" in controls_html(form(integers("row", "col")))
    plain = find_board({"board": lights}, board_hints(form(integers("row", "col", "power")), Interface()))
    assert plain is not None and "data-action" not in plain.html  # a third required field: the form's to fill
    assert controls_html(form(integers("row", "col", "power"))) == ""


def test_a_column_alone_is_a_click_on_a_column_and_the_discs_are_named_in_a_legend() -> None:
    grid = [[0] * 7 for _ in range(5)] + [[0, 0, 0, 1, 2, 0, 0]]
    described = {"grid": {"type": "array", "description": "6 rows of 7 cells: 0 empty, 1 you, 2 opponent"}}
    info = Interface(schema={"action": CONNECT_FOUR, "observation": {"type": "object", "properties": described}})
    board = find_board({"grid": grid}, board_hints(form(CONNECT_FOUR), info))
    assert board is not None
    sent = actions(board.html)
    assert sent[:7] == [{"column": c} for c in range(7)]  # the ▼ buttons above the columns
    assert sent[7 + 5 * 7 + 4] == {"column": 4}  # a cell sends its column
    assert re.findall(r'aria-label="(column \d)"', board.html) == [f"column {c}" for c in range(7)]
    legend = re.search(r'<p class="board-legend".*</p>', board.html)
    assert legend is not None
    assert re.findall(r'<span class="swatch (\w+)"></span>(\w+)', legend.group()) == [
        ("one", "you"),
        ("two", "opponent"),
    ]
    unnamed = find_board({"grid": grid}, Hints())
    assert unnamed is not None and "data-action" not in unnamed.html and "board-legend" in unnamed.html


def test_a_click_sends_only_the_forms_own_fields_with_valid_values() -> None:
    maze = form(MAZE)
    assert direct_action(maze, {"direction": "up"}) == {"direction": "up"}
    assert direct_action(maze, {"direction": "sideways"}) is None
    assert direct_action(maze, {"direction": "up", "teleport": True}) is None
    assert direct_action(maze, ["up"]) is None
    lights = form(integers("row", "col"))
    assert direct_action(lights, {"row": 1, "col": 2}) == {"row": 1, "col": 2}
    assert direct_action(lights, {"row": -1, "col": 2}) is None
    assert direct_action(lights, {"row": 1}) is None  # a required field missing
    tool = form(integers("row", "col"), tool="press")
    assert direct_action(tool, {"row": 0, "col": 0}) == {
        "type": "call_tool", "tool_name": "press", "arguments": {"row": 0, "col": 0}
    }  # fmt: skip
