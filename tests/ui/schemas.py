"""Action schemas as openenv 0.10 servers publish them (pydantic's model_json_schema output)."""

from typing import Any

METADATA = {"additionalProperties": True, "description": "Additional metadata for the action", "type": "object"}

MAZE: dict[str, Any] = {
    "additionalProperties": False,
    "description": "One move of the agent on the text grid.",
    "properties": {
        "metadata": METADATA,
        "direction": {
            "description": "Where to move one square: 'up', 'down', 'left' or 'right'.",
            "enum": ["up", "down", "left", "right"],
            "title": "Direction",
            "type": "string",
        },
    },
    "required": ["direction"],
    "title": "MazeAction",
    "type": "object",
}

CONNECT_FOUR: dict[str, Any] = {
    "properties": {
        "metadata": METADATA,
        "column": {
            "description": "Column to play, 0 (left) to 6 (right)",
            "type": "integer",
            "minimum": 0,
            "maximum": 6,
        },
    },
    "required": ["column"],
    "title": "ConnectFourAction",
    "type": "object",
}

ARITHMETIC: dict[str, Any] = {
    "properties": {
        "metadata": METADATA,
        "answer": {"description": "The final answer", "maxLength": 100, "type": "string"},
        "reasoning": {
            "anyOf": [{"maxLength": 20000, "type": "string"}, {"type": "null"}],
            "default": None,
            "description": "Optional working; it is not graded.",
        },
    },
    "required": ["answer"],
    "title": "ArithmeticAction",
    "type": "object",
}

CALL_TOOL: dict[str, Any] = {
    "properties": {
        "metadata": METADATA,
        "type": {"const": "call_tool", "default": "call_tool", "type": "string"},
        "tool_name": {"description": "Name of the tool to call", "type": "string"},
        "arguments": {"additionalProperties": True, "description": "Arguments for the tool", "type": "object"},
    },
    "required": ["tool_name"],
    "title": "CallToolAction",
    "type": "object",
}

NESTED: dict[str, Any] = {
    "$defs": {
        "Move": {
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["x", "y"],
            "title": "Move",
            "type": "object",
        },
        "Speed": {"enum": ["slow", "fast"], "type": "string", "title": "Speed"},
    },
    "properties": {
        "move": {"$ref": "#/$defs/Move"},
        "speed": {"anyOf": [{"$ref": "#/$defs/Speed"}, {"type": "null"}], "default": None},
        "path": {"items": {"type": "integer"}, "type": "array", "default": []},
        "careful": {"type": "boolean", "default": True},
        "weight": {"type": "number", "exclusiveMinimum": 0},
    },
    "required": ["move"],
    "type": "object",
}

CONVERT_UNITS_TOOL: dict[str, Any] = {
    "name": "convert_units",
    "description": "Convert a value between units.",
    "inputSchema": {
        "properties": {
            "value": {"type": "number"},
            "from_unit": {"type": "string"},
            "to_unit": {"type": "string"},
        },
        "required": ["value", "from_unit", "to_unit"],
        "type": "object",
    },
}
