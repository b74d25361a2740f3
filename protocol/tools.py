"""MCP tools as OpenEnv servers list them, and actions: the one rule for when an action is a tool call.

A server lists tools in one of three shapes (FastMCP's camelCase `inputSchema`, the
mcp_server fallback, and snake_case `input_schema` in a list_tools observation); they are
read into one `Tool`. openenv routes an action `{"type": "call_tool", ...}` to its MCP
classes when the environment's action class is CallToolAction (a `tool_name` field) or
openenv's bare `Action` (nothing but `metadata`): then, and only then, actions are tool calls.
"""

from dataclasses import dataclass
from typing import Any

from protocol.schemas import Schema, example_value, resolve

__all__ = [
    "OPENING_META",
    "Tool",
    "cheapest_tool",
    "example_action",
    "parse_tools",
    "takes_tool_calls",
    "tool_arguments",
    "tool_call",
]

# envhub's MCP door answers initialize with this `_meta` key when it began the session's episode with a reset:
# that reset's reward, done and observation, as every tool result's structuredContent has them.
OPENING_META = "envhub/opening"


@dataclass(frozen=True)
class Tool:
    name: str
    description: str = ""
    input_schema: Schema | None = None

    def listed(self) -> dict[str, Any]:
        """The tool as tools/list writes it, as the catalog keeps it."""
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema or {}}


def parse_tools(payload: Any) -> list[Tool]:
    """Tools from any of the three tool-list shapes: a tools/list result, or a bare list of tools."""
    items = payload.get("tools") if isinstance(payload, dict) else payload
    tools = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        schema = item.get("inputSchema", item.get("input_schema"))
        tools.append(Tool(item["name"], str(item.get("description") or ""), schema if isinstance(schema, dict) else {}))
    return tools


def takes_tool_calls(action_schema: Any) -> bool:
    """Whether the server takes MCP tool calls as actions: its action schema is CallToolAction or bare Action."""
    if not isinstance(action_schema, dict):
        return False
    properties = resolve(action_schema, action_schema).get("properties")
    if not isinstance(properties, dict):
        return False
    return "tool_name" in properties or set(properties) <= {"metadata"}


def tool_call(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The action that calls an MCP tool, over /ws step or HTTP /step."""
    return {"type": "call_tool", "tool_name": tool_name, "arguments": arguments}


def cheapest_tool(tools: list[Tool]) -> Tool:
    """The tool cheapest to call: the fewest required arguments, ties in listed order."""

    def required(tool: Tool) -> int:
        listed = (tool.input_schema or {}).get("required")
        return len(listed) if isinstance(listed, list) else 0

    return min(tools, key=required)


def tool_arguments(tool: Tool) -> dict[str, Any]:
    """The smallest arguments the tool's input schema accepts."""
    value = example_value(tool.input_schema or {})
    return value if isinstance(value, dict) else {}


def example_action(action_schema: Any, tools: list[Tool] | None) -> dict[str, Any] | None:
    """A valid action: a call of the cheapest tool when the server takes tool calls, else the smallest
    instance of the action schema; None when neither describes one."""
    if tools and (action_schema is None or takes_tool_calls(action_schema)):
        tool = cheapest_tool(tools)
        return tool_call(tool.name, tool_arguments(tool))
    if isinstance(action_schema, dict):
        value = example_value(action_schema)
        return value if isinstance(value, dict) else None
    return None
