"""The tools an environment offers through the door.

An MCP environment offers its own tools as they are. A schema-action environment (wordle, a maze, chess, ...)
gets three generated ones: `reset` (a seed, the environment's own options, or a task from a split or a linked
dataset's row), `step` (the action, its schema with every `$ref` resolved and a description from the README) and
`state`. Every tool's outputSchema is the result envelope (reward, done, observation): it is what each result's
structuredContent holds.
"""

import re
from dataclasses import dataclass, field
from typing import Any

from mcp.types import Tool, ToolAnnotations

from gateway.mcp.recorder import Card
from gateway.mcp.results import ENVELOPE
from protocol.schemas import Schema, inline_refs
from protocol.tools import parse_tools, takes_tool_calls

__all__ = ["RESET", "STATE", "STEP", "Surface", "action_surface", "readme_excerpt", "tools_surface"]

RESET, STEP, STATE = "reset", "step", "state"
_EXCERPT_MAX = 1500
_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")
_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.DOTALL)


@dataclass(frozen=True)
class Surface:
    """What an environment's sessions offer through the door."""

    tools: tuple[Tool, ...]
    generated: bool  # reset/step/state stand for the environment's HTTP actions
    tool_steps: bool = False  # an MCP environment whose steps are tool calls: they carry its rewards and done
    wrapped: bool = False  # the step's action is not an object: the tool takes it as its `action` argument
    splits: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    names: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", frozenset(tool.name for tool in self.tools))


def tools_surface(listed: list[dict[str, Any]], action_schema: Schema | None) -> Surface:
    """An MCP environment's tools as it lists them; its steps carry rewards when its actions are tool calls."""
    tools = []
    for tool in parse_tools(listed):
        raw = next((item for item in listed if isinstance(item, dict) and item.get("name") == tool.name), {})
        annotations = raw.get("annotations")
        tools.append(
            Tool(
                name=tool.name,
                title=raw.get("title") if isinstance(raw.get("title"), str) else None,
                description=tool.description or None,
                inputSchema=_object_schema(tool.input_schema or {}),
                outputSchema=ENVELOPE,
                annotations=ToolAnnotations.model_validate(annotations) if isinstance(annotations, dict) else None,
            )
        )
    return Surface(tuple(tools), generated=False, tool_steps=takes_tool_calls(action_schema))


def action_surface(action_schema: Schema, card: Card, splits: tuple[str, ...] = ()) -> Surface:
    """Generated reset, step and state for an environment whose actions are described by a JSON Schema."""
    schema = inline_refs(action_schema)
    wrapped = schema.get("type") != "object" and not isinstance(schema.get("properties"), dict)
    if wrapped:
        step_input: Schema = {"type": "object", "properties": {"action": schema}, "required": ["action"]}
    else:
        properties = {k: v for k, v in (schema.get("properties") or {}).items() if k != "metadata"}
        step_input = {k: v for k, v in schema.items() if k not in ("title", "description", "properties")}
        step_input |= {"type": "object", "properties": properties}
        if isinstance(schema.get("required"), list):
            step_input["required"] = [r for r in schema["required"] if r != "metadata"]
    name = card.title or card.environment
    said = str(action_schema.get("description") or "").strip()
    excerpt = readme_excerpt(card.readme)
    step_description = f"Take one action in {name} and get the observation, the reward and whether it is done."
    if said:
        step_description += f" The action: {said}"
    if excerpt:
        step_description += f"\n\nFrom the environment's README:\n{excerpt}"
    step_description += "\n\nCall reset first; once done is true, the episode is over: call reset to play another."
    reset = Tool(
        name=RESET,
        description=(
            f"Start a new episode of {name} and get its first observation. Every argument is optional: a seed "
            "for a repeatable episode, a task from a split (split and index) or a row of a linked dataset "
            "(dataset, split and index), and options the environment's reset takes."
        ),
        inputSchema=_reset_schema(splits, card.datasets),
        outputSchema=ENVELOPE,
        annotations=ToolAnnotations(destructiveHint=False, openWorldHint=False),
    )
    step = Tool(
        name=STEP,
        description=step_description,
        inputSchema=step_input,
        outputSchema=ENVELOPE,
        annotations=ToolAnnotations(destructiveHint=False, openWorldHint=False),
    )
    state = Tool(
        name=STATE,
        description=f"The state of the {name} episode under way (what the environment keeps of it), as an object.",
        inputSchema={"type": "object", "properties": {}},
        outputSchema=ENVELOPE,
        annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False),
    )
    return Surface((reset, step, state), generated=True, wrapped=wrapped, splits=splits, datasets=card.datasets)


def _reset_schema(splits: tuple[str, ...], datasets: tuple[str, ...]) -> Schema:
    split: Schema = {"type": "string", "description": "a task split of the environment's Task API, or the dataset's"}
    if splits and not datasets:
        split["enum"] = list(splits)
    properties: dict[str, Any] = {
        "seed": {"type": "integer", "description": "makes the episode repeatable"},
        "split": split,
        "index": {"type": "integer", "minimum": 0, "description": "the task's (or the row's) index in the split"},
        "options": {
            "type": "object",
            "description": "keyword arguments of the environment's own reset (its README names them)",
            "additionalProperties": True,
        },
    }
    if datasets:
        properties["dataset"] = {"type": "string", "enum": list(datasets), "description": "a linked dataset"}
    return {"type": "object", "properties": properties, "additionalProperties": False}


def _object_schema(schema: Schema) -> Schema:
    """MCP wants an object schema for a tool's input: an empty one is one that takes nothing."""
    if schema.get("type") == "object" or "properties" in schema:
        return {"type": "object", **schema}
    return {"type": "object", "properties": {}}


def readme_excerpt(readme: str, limit: int = _EXCERPT_MAX) -> str:
    """What a README says about actions (its section whose heading names them), else its first paragraph."""
    lines = _FRONT_MATTER.sub("", readme).splitlines()
    section: list[str] = []
    level = 0
    for line in lines:
        heading = _HEADING.match(line)
        if level:
            if heading and len(heading[1]) <= level:
                break
            section.append(line)
        elif heading and re.search(r"\baction", heading[2], re.IGNORECASE):
            level = len(heading[1])
    text = "\n".join(section).strip()
    if not text:
        paragraphs = "\n".join(line for line in lines if not _HEADING.match(line)).split("\n\n")
        text = next((p.strip() for p in paragraphs if p.strip() and not p.strip().startswith(("<", "!["))), "")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
