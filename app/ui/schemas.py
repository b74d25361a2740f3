"""JSON Schemas of actions, observations and tools, read for people: one row per field.

The schemas come from pydantic's model_json_schema() on the environment's side, so they
carry $defs/$ref, anyOf with null for optional fields, Literal enums and consts.
"""

import json
from dataclasses import dataclass
from typing import Any

from protocol.schemas import Schema, resolve


@dataclass(frozen=True)
class SchemaRow:
    name: str
    type: str
    required: bool
    default: str
    description: str


def unwrap_optional(node: Schema, root: Schema) -> tuple[Schema, bool]:
    """`X | None` as pydantic writes it (anyOf with a null branch): X, and whether null is allowed."""
    node = resolve(node, root)
    for key in ("anyOf", "oneOf"):
        branches = node.get(key)
        if isinstance(branches, list):
            resolved = [resolve(b, root) for b in branches]
            kept = [b for b in resolved if b.get("type") != "null"]
            if len(kept) == 1 and len(kept) < len(resolved):
                outer = {k: v for k, v in node.items() if k != key}
                return kept[0] | outer, True
    types = node.get("type")
    if isinstance(types, list) and "null" in types:
        rest = [t for t in types if t != "null"]
        return node | {"type": rest[0] if len(rest) == 1 else rest}, True
    return node, False


def type_label(node: Any, root: Schema, depth: int = 0) -> str:
    """A short human name for a schema: 'integer 0-6', 'one of up, down', 'list of integer'."""
    schema, nullable = unwrap_optional(node, root)
    label = _bare_label(schema, root, depth)
    return f"{label} or null" if nullable else label


def _bare_label(schema: Schema, root: Schema, depth: int) -> str:
    if "const" in schema:
        return f"always {json.dumps(schema['const'])}"
    if isinstance(schema.get("enum"), list):
        return "one of " + ", ".join(str(v) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and depth < 4:
            return " or ".join(type_label(b, root, depth + 1) for b in schema[key])
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        return f"list of {type_label(items, root, depth + 1)}" if items and depth < 4 else "list"
    if kind == "object" or "properties" in schema:
        title = schema.get("title")
        return f"object ({title})" if isinstance(title, str) and title else "object"
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind in ("integer", "number", "string"):
        return str(kind) + _bounds(schema)
    return str(kind) if kind else "any"


def _bounds(schema: Schema) -> str:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if schema.get("type") == "string":
        low, high = schema.get("minLength"), schema.get("maxLength")
        if low is None and high is None:
            return ""
        return f", {low or 0}–{high} characters" if high is not None else f", at least {low} characters"
    if low is None and high is None:
        return ""
    if high is None:
        return f" ≥ {low}"
    if low is None:
        return f" ≤ {high}"
    return f" {low}–{high}"


def fields_of(schema: Any) -> list[tuple[str, Schema, bool]]:
    """(name, property schema, required) for each property of an object schema, in order."""
    root = schema if isinstance(schema, dict) else {}
    node = resolve(root, root)
    properties = node.get("properties")
    if not isinstance(properties, dict):
        return []
    listed = node.get("required")
    required: list[Any] = listed if isinstance(listed, list) else []
    return [(str(name), prop if isinstance(prop, dict) else {}, name in required) for name, prop in properties.items()]


def is_plumbing(name: str, prop: Schema, root: Schema) -> bool:
    """openenv's base `metadata: dict` field, present on every action and observation."""
    node, _ = unwrap_optional(prop, root)
    return name == "metadata" and node.get("type") == "object" and not node.get("properties")


def schema_rows(schema: Any) -> list[SchemaRow]:
    """The fields of an object schema as table rows, openenv's metadata field left out."""
    root = schema if isinstance(schema, dict) else {}
    rows = []
    for name, prop, required in fields_of(schema):
        if is_plumbing(name, prop, root):
            continue
        node, _ = unwrap_optional(prop, root)
        default = json.dumps(prop["default"]) if "default" in prop else ""
        description = str(prop.get("description") or node.get("description") or "")
        rows.append(SchemaRow(name, type_label(prop, root), required, default, description))
    return rows
