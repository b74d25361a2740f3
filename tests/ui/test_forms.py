"""Action forms from JSON Schemas: which control each field gets, and values back into actions."""

import pytest

from app.ui.forms import (
    FieldKind,
    action_from_form,
    form_fields,
    legal_action,
    snippet_action,
    visible,
)
from app.ui.schemas import schema_rows, type_label
from protocol.tools import takes_tool_calls, tool_call
from tests.ui.schemas import ARITHMETIC, CALL_TOOL, CONNECT_FOUR, MAZE, NESTED


def kinds(schema: dict[str, object]) -> dict[str, FieldKind]:
    return {f.name: f.kind for f in form_fields(schema)}


def test_each_json_type_gets_its_control() -> None:
    assert kinds(MAZE) == {"direction": FieldKind.CHOICE}
    assert kinds(CONNECT_FOUR) == {"column": FieldKind.INTEGER}
    assert kinds(ARITHMETIC) == {"answer": FieldKind.TEXT, "reasoning": FieldKind.TEXT}
    assert kinds(NESTED) == {
        "move": FieldKind.JSON,
        "speed": FieldKind.CHOICE,
        "path": FieldKind.JSON,
        "careful": FieldKind.FLAG,
        "weight": FieldKind.NUMBER,
    }
    assert kinds(CALL_TOOL) == {"type": FieldKind.CONST, "tool_name": FieldKind.TEXT, "arguments": FieldKind.JSON}


def test_required_fields_bounds_and_defaults() -> None:
    (column,) = form_fields(CONNECT_FOUR)
    assert (column.required, column.minimum, column.maximum, column.label) == (True, 0, 6, "column *")
    answer, reasoning = form_fields(ARITHMETIC)
    assert answer.required and not reasoning.required
    assert reasoning.has_default and reasoning.default is None
    fields = {f.name: f for f in form_fields(NESTED)}
    assert fields["speed"].choices == ("slow", "fast")
    assert fields["careful"].initial() is True
    assert fields["path"].initial() == "[]"
    assert fields["weight"].minimum == 0
    assert form_fields(MAZE)[0].initial() == "up"  # a required choice starts on its first option


def test_metadata_plumbing_is_left_out_but_can_be_kept() -> None:
    assert "metadata" not in kinds(MAZE)
    assert "metadata" in {f.name for f in form_fields(MAZE, keep_metadata=True)}
    assert [r.name for r in schema_rows(MAZE)] == ["direction"]


def test_values_become_an_action() -> None:
    action, errors = action_from_form(form_fields(NESTED), ['{"x": 1, "y": 2}', "fast", "[3, 4]", False, 2.5])
    assert errors == {}
    assert action == {"move": {"x": 1, "y": 2}, "speed": "fast", "path": [3, 4], "careful": False, "weight": 2.5}
    action, errors = action_from_form(form_fields(CONNECT_FOUR), [3.0])
    assert action == {"column": 3} and isinstance(action["column"], int)
    action, errors = action_from_form(form_fields(ARITHMETIC), ["42", ""])
    assert action == {"answer": "42"}  # an empty optional field is left out


def test_invalid_values_are_reported_by_field() -> None:
    _, errors = action_from_form(form_fields(NESTED), ["{broken", None, "", True, -1])
    assert errors["move"].startswith("is not valid JSON")
    assert errors["weight"] == "must be at least 0"
    _, errors = action_from_form(form_fields(CONNECT_FOUR), [7])
    assert errors == {"column": "must be at most 6"}
    _, errors = action_from_form(form_fields(CONNECT_FOUR), [2.5])
    assert errors == {"column": "must be a whole number"}
    _, errors = action_from_form(form_fields(ARITHMETIC), ["", None])
    assert errors == {"answer": "is required"}
    _, errors = action_from_form(form_fields(MAZE), ["north"])
    assert errors == {"direction": "must be one of up, down, left, right"}


def test_tool_calls() -> None:
    assert takes_tool_calls(CALL_TOOL) and not takes_tool_calls(MAZE)
    fields = form_fields(CALL_TOOL)
    assert [f.name for f in visible(fields)] == ["tool_name", "arguments"]
    action, errors = action_from_form(fields, ["calculate", '{"expression": "1+1"}'])
    assert errors == {}
    assert action == {"type": "call_tool", "tool_name": "calculate", "arguments": {"expression": "1+1"}}
    assert tool_call("calculate", {"expression": "2"}) == {
        "type": "call_tool",
        "tool_name": "calculate",
        "arguments": {"expression": "2"},
    }


@pytest.mark.parametrize(
    ("schema", "choice", "action"),
    [
        (CONNECT_FOUR, 3, {"column": 3}),
        (MAZE, "left", {"direction": "left"}),
        (MAZE, "north", None),  # not a value the field accepts
        (NESTED, {"move": {"x": 0, "y": 0}}, {"move": {"x": 0, "y": 0}}),  # listed as whole actions
        (ARITHMETIC, "7", {"answer": "7"}),
    ],
)
def test_legal_actions_map_onto_the_one_required_field(
    schema: dict[str, object], choice: object, action: dict[str, object] | None
) -> None:
    assert legal_action(form_fields(schema), choice) == action


def test_examples_fill_required_fields() -> None:
    assert snippet_action(form_fields(MAZE)) == {"direction": "up"}
    assert snippet_action(form_fields(CONNECT_FOUR)) == {"column": 0}
    assert snippet_action(form_fields(ARITHMETIC)) == {"answer": "42"}
    assert snippet_action(form_fields(CALL_TOOL)) == {"type": "call_tool", "tool_name": "hello"}


def test_type_labels_read_like_prose() -> None:
    root = NESTED
    properties = NESTED["properties"]
    assert isinstance(properties, dict)
    assert type_label(properties["move"], root) == "object (Move)"
    assert type_label(properties["speed"], root) == "one of slow, fast or null"
    assert type_label(properties["path"], root) == "list of integer"
    assert type_label(properties["weight"], root) == "number ≥ 0"
    assert type_label(CONNECT_FOUR["properties"]["column"], CONNECT_FOUR) == "integer 0–6"
    assert type_label(CALL_TOOL["properties"]["type"], CALL_TOOL) == 'always "call_tool"'
    rows = {r.name: r for r in schema_rows(ARITHMETIC)}
    assert rows["answer"].type == "string, 0–100 characters" and rows["answer"].required
    assert rows["reasoning"].default == "null" and not rows["reasoning"].required
