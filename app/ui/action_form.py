"""The playground's action form: the fields of the action schema or of one MCP tool's arguments, as Gradio controls,
and what the panel says of tools and task splits."""

from dataclasses import dataclass
from typing import Any, Literal

import gradio as gr

from app.ui.forms import FieldKind, FormField, form_fields
from envclient.interface import Interface
from protocol.tools import takes_tool_calls, tool_call


@dataclass(frozen=True)
class FormState:
    """The action form on screen: fields of the action schema, or of one MCP tool's arguments."""

    mode: Literal["none", "action", "tool"] = "none"
    fields: tuple[FormField, ...] = ()
    tool: str | None = None

    def action(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """What a step sends for the form's values: the action, or a call of the form's tool."""
        return tool_call(self.tool, arguments) if self.mode == "tool" and self.tool else arguments


def initial_form(info: Interface) -> FormState:
    schema = info.action_schema
    if info.tools and (schema is None or takes_tool_calls(schema)):
        first = info.tools[0]
        return FormState("tool", tuple(form_fields(first.input_schema)), first.name)
    if schema is not None:
        return FormState("action", tuple(form_fields(schema)))
    return FormState()


def tool_form(info: Interface, name: str | None) -> FormState:
    tool = next((t for t in info.tools or () if t.name == name), None)
    return FormState("tool", tuple(form_fields(tool.input_schema)), tool.name) if tool else FormState()


def field_control(field: FormField, key: str) -> Any:
    common: dict[str, Any] = {
        "label": field.label,
        "info": field.description or field.type_label or None,
        "key": f"{key}-{field.name}",
        "elem_id": f"field-{field.name}",
        "elem_classes": ["action-field"],
        # Gradio infers a control's interactivity from the events it feeds, which a control drawn by gr.render
        # does not always get: a dropdown came up disabled.
        "interactive": True,
    }
    value = field.initial()
    if field.kind == FieldKind.CHOICE:
        return gr.Dropdown([(str(c), c) for c in field.choices], value=value, **common)
    if field.kind == FieldKind.FLAG:
        return gr.Checkbox(value=value, **common)
    if field.kind in (FieldKind.INTEGER, FieldKind.NUMBER):
        return gr.Number(
            value=value,
            precision=0 if field.kind == FieldKind.INTEGER else None,
            minimum=field.minimum,
            maximum=field.maximum,
            **common,
        )
    if field.kind == FieldKind.JSON:
        common.pop("info")
        return gr.Code(value=value, language="json", lines=3, **common)
    return gr.Textbox(value=value, **common)


def tool_help(info: Interface, name: str | None) -> str:
    tool = next((t for t in info.tools or () if t.name == name), None)
    return f"`{tool.name}`: {tool.description}" if tool and tool.description else ""


def index_hint(info: Interface, split: str | None) -> str:
    found = next((s for s in info.splits if s.name == split), None) or (info.splits[0] if info.splits else None)
    if found is None or not found.count:
        return "empty for any task"
    return f"0 to {found.count - 1} in {found.name}; empty for any task"
