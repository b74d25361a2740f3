"""Action forms from JSON Schemas, and form values back into an action.

A field's kind picks its control: string → textbox, enum → dropdown, boolean → checkbox,
integer/number → number with bounds, anything nested → JSON editor; consts are sent
without being shown.
"""

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.ui.schemas import fields_of, is_plumbing, type_label, unwrap_optional
from protocol.schemas import Schema


class FieldKind(StrEnum):
    TEXT = "text"
    CHOICE = "choice"
    FLAG = "flag"
    INTEGER = "integer"
    NUMBER = "number"
    JSON = "json"
    CONST = "const"


@dataclass(frozen=True)
class FormField:
    name: str
    kind: FieldKind
    required: bool = False
    default: Any = None
    has_default: bool = False
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    description: str = ""
    type_label: str = ""

    @property
    def label(self) -> str:
        return f"{self.name} *" if self.required else self.name

    def initial(self) -> Any:
        """What the control shows before the user touches it."""
        if self.kind == FieldKind.JSON:
            return json.dumps(self.default, indent=2) if self.has_default else ""
        if self.kind == FieldKind.FLAG:
            return bool(self.default) if self.has_default else False
        if self.kind == FieldKind.CHOICE and not self.has_default and self.required and self.choices:
            return self.choices[0]
        return self.default if self.has_default else None


def _kind(node: Schema) -> FieldKind:
    if "const" in node:
        return FieldKind.CONST
    if isinstance(node.get("enum"), list) and node["enum"]:
        return FieldKind.CHOICE
    kind = node.get("type")
    if kind == "string":
        return FieldKind.TEXT
    if kind == "boolean":
        return FieldKind.FLAG
    if kind == "integer":
        return FieldKind.INTEGER
    if kind == "number":
        return FieldKind.NUMBER
    return FieldKind.JSON


def form_fields(schema: Any, *, keep_metadata: bool = False) -> list[FormField]:
    """One form field per property of an object schema."""
    root = schema if isinstance(schema, dict) else {}
    fields = []
    for name, prop, required in fields_of(schema):
        if not keep_metadata and is_plumbing(name, prop, root):
            continue
        node, _ = unwrap_optional(prop, root)
        kind = _kind(node)
        low = node.get("minimum", node.get("exclusiveMinimum"))
        high = node.get("maximum", node.get("exclusiveMaximum"))
        fields.append(
            FormField(
                name=name,
                kind=kind,
                required=required,
                default=node["const"] if kind == FieldKind.CONST else prop.get("default", node.get("default")),
                has_default=kind == FieldKind.CONST or "default" in prop or "default" in node,
                choices=tuple(node["enum"]) if kind == FieldKind.CHOICE else (),
                minimum=float(low) if isinstance(low, int | float) else None,
                maximum=float(high) if isinstance(high, int | float) else None,
                description=str(prop.get("description") or node.get("description") or ""),
                type_label=type_label(prop, root),
            )
        )
    return fields


def visible(fields: Sequence[FormField]) -> list[FormField]:
    return [f for f in fields if f.kind != FieldKind.CONST]


def _number(field: FormField, value: Any) -> tuple[Any, str | None]:
    if isinstance(value, str):
        try:
            value = float(value) if value.strip() else None
        except ValueError:
            return None, "must be a number"
    if value is None:
        return None, None
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return None, "must be a number"
    if field.kind == FieldKind.INTEGER:
        if value != int(value):
            return None, "must be a whole number"
        value = int(value)
    if field.minimum is not None and value < field.minimum:
        return None, f"must be at least {field.minimum:g}"
    if field.maximum is not None and value > field.maximum:
        return None, f"must be at most {field.maximum:g}"
    return value, None


def _value(field: FormField, value: Any) -> tuple[Any, str | None]:
    """The JSON value of one control, None when left empty, or why it is invalid."""
    if field.kind in (FieldKind.INTEGER, FieldKind.NUMBER):
        return _number(field, value)
    if field.kind == FieldKind.FLAG:
        return bool(value), None
    if field.kind == FieldKind.CHOICE:
        if value in (None, ""):
            return None, None
        matching = [c for c in field.choices if c == value or str(c) == str(value)]
        return (matching[0], None) if matching else (None, f"must be one of {', '.join(map(str, field.choices))}")
    if field.kind == FieldKind.JSON:
        if not isinstance(value, str):
            return value, None
        if not value.strip():
            return None, None
        try:
            return json.loads(value), None
        except json.JSONDecodeError as exc:
            return None, f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if value is None or value == "":
        return None, None
    return str(value), None


def action_from_form(fields: Sequence[FormField], values: Sequence[Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The action from the visible fields' values (in order); errors by field name when any."""
    action: dict[str, Any] = {f.name: f.default for f in fields if f.kind == FieldKind.CONST}
    errors: dict[str, str] = {}
    for field, raw in zip(visible(fields), values, strict=False):
        value, error = _value(field, raw)
        if error:
            errors[field.name] = error
        elif value is None:
            if field.required:
                errors[field.name] = "is required"
        else:
            action[field.name] = value
    return action, errors


def describe_errors(errors: dict[str, str]) -> str:
    return "\n".join(f"- `{name}` {message}" for name, message in errors.items())


def snippet_value(field: FormField) -> Any:
    """A value that reads well in a snippet: the default, the first choice, the lower bound, "hello"."""
    if field.has_default and field.default is not None:
        return field.default
    if field.kind == FieldKind.CHOICE:
        return field.choices[0]
    if field.kind == FieldKind.FLAG:
        return False
    if field.kind in (FieldKind.INTEGER, FieldKind.NUMBER):
        low = field.minimum if field.minimum is not None else 0
        return int(low) if field.kind == FieldKind.INTEGER else float(low)
    if field.kind == FieldKind.TEXT:
        return "42" if re.search(r"answer|number|value", field.name) else "hello"
    return {}


def snippet_action(fields: Sequence[FormField]) -> dict[str, Any]:
    """An action for a snippet, with every required field (and consts) filled in."""
    return {f.name: snippet_value(f) for f in fields if f.required or f.kind == FieldKind.CONST}


# -- legal actions


def legal_action(fields: Sequence[FormField], choice: Any) -> dict[str, Any] | None:
    """The action a listed legal action stands for: itself when it is an object, else the one
    field it can fill (the only required field, or the only visible one)."""
    if isinstance(choice, dict):
        return choice
    candidates = [f for f in visible(fields) if f.required] or visible(fields)
    if len(candidates) != 1:
        return None
    value, error = _value(candidates[0], choice)
    if error or value is None:
        return None
    return {f.name: f.default for f in fields if f.kind == FieldKind.CONST} | {candidates[0].name: value}
