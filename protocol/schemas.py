"""JSON Schemas as OpenEnv servers write them (pydantic's model_json_schema): local `$ref`s and example values.

The schemas of `/schema` and of MCP tools carry `$defs`/`$ref`, anyOf with null for
optional fields, Literal enums and consts. `resolve` follows a node's local reference;
`inline_refs` replaces them all, for clients that follow none;
`example_value` gives the smallest instance a schema accepts, to build a valid action.
It honours `const`, `enum`, `default`, `examples`, bounds, lengths, `required`, local
`$ref`s (`$defs`, `definitions`), `anyOf`/`oneOf`/`allOf` and type lists, and stops at
a depth limit on recursive schemas.
"""

import math
from typing import Any

__all__ = ["Schema", "example_value", "inline_refs", "resolve", "resolve_ref"]

Schema = dict[str, Any]

_MAX_DEPTH = 16
_DEFINITIONS = ("$defs", "definitions")
_FORMATS = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "00:00:00Z",
    "email": "someone@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "hostname": "example.com",
}


class _Unresolvable(Exception):
    pass


def resolve_ref(ref: str, root: Schema) -> Any:
    """The schema a local reference ('#/$defs/Name') points at; _Unresolvable for any other."""
    if not ref.startswith("#"):
        raise _Unresolvable(ref)
    node: Any = root
    for part in ref[1:].split("/"):
        if not part:
            continue
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise _Unresolvable(ref)
    return node


def resolve(node: Any, root: Schema, depth: int = 0) -> Schema:
    """The node with its local $ref followed (its own keys win) and a single allOf merged in; {} for a non-schema."""
    if not isinstance(node, dict):
        return {}
    ref = node.get("$ref")
    if isinstance(ref, str) and depth < 20:
        try:
            target = resolve_ref(ref, root)
        except _Unresolvable:
            target = {}
        merged = {k: v for k, v in node.items() if k != "$ref"}
        return resolve(target, root, depth + 1) | merged
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and depth < 20:
        merged = {k: v for k, v in node.items() if k != "allOf"}
        return resolve(all_of[0], root, depth + 1) | merged
    return node


def inline_refs(schema: Schema) -> Schema:
    """The schema with each local `$ref` replaced by what it points at and its `$defs` dropped, for clients that
    follow no references. A recursive reference stays as it is, and so do the definitions it needs."""
    recursive = False

    def walk(node: Any, trail: tuple[str, ...]) -> Any:
        nonlocal recursive
        if isinstance(node, list):
            return [walk(item, trail) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            if ref in trail or len(trail) > _MAX_DEPTH:
                recursive = True
                return node
            try:
                target = resolve_ref(ref, schema)
            except _Unresolvable:
                return node
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            return walk({**target, **siblings} if isinstance(target, dict) else siblings, (*trail, ref))
        return {k: walk(v, trail) for k, v in node.items()}

    inlined: Schema = walk({k: v for k, v in schema.items() if k not in _DEFINITIONS}, ())
    if recursive:
        inlined |= {k: schema[k] for k in _DEFINITIONS if k in schema}
    return inlined


def example_value(schema: Any, root: dict[str, Any] | None = None) -> Any:
    """A value the schema accepts (best effort: `pattern` and `not` are not solved)."""
    if root is None:
        root = schema if isinstance(schema, dict) else {}
    return _example(schema, root, 0)


def _example(schema: Any, root: dict[str, Any], depth: int) -> Any:
    if schema is True or schema is None or not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return None
    if "$ref" in schema and isinstance(schema["$ref"], str):
        try:
            target = resolve_ref(schema["$ref"], root)
        except _Unresolvable:
            target = {}
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        merged = {**target, **siblings} if isinstance(target, dict) else siblings
        return _example(merged, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    if "default" in schema and _plausible_default(schema):
        return schema["default"]
    examples = schema.get("examples")
    if isinstance(examples, list) and examples:
        return examples[0]
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            return _example(_pick_branch(branches, root), root, depth + 1)
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and all_of:
        return _example(_merge_all_of(schema, all_of, root), root, depth + 1)
    kind = _kind(schema)
    if kind == "object":
        return _object(schema, root, depth)
    if kind == "array":
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        prefix = schema.get("prefixItems")
        count = max(int(schema.get("minItems", 0) or 0), 0)
        if isinstance(prefix, list) and prefix:
            values = [_example(p, root, depth + 1) for p in prefix]
            return values + [_example(items, root, depth + 1) for _ in range(max(count - len(values), 0))]
        return [_example(items, root, depth + 1) for _ in range(min(count, 64))]
    if kind == "string":
        return _string(schema)
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return {} if "properties" in schema else None


def _plausible_default(schema: dict[str, Any]) -> bool:
    """A default of null for a schema that does not allow null is pydantic's 'not set', not a value."""
    return schema["default"] is not None or _allows_null(schema)


def _allows_null(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    branches = schema.get("anyOf") or schema.get("oneOf") or []
    return any(isinstance(b, dict) and b.get("type") == "null" for b in branches)


def _pick_branch(branches: list[Any], root: dict[str, Any]) -> Any:
    """The first branch that is not just null: a real value says more than None."""
    for branch in branches:
        if isinstance(branch, dict) and branch.get("type") != "null":
            return branch
    return branches[0]


def _merge_all_of(schema: dict[str, Any], parts: list[Any], root: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    properties: dict[str, Any] = dict(merged.get("properties") or {})
    required: list[str] = list(merged.get("required") or [])
    for part in parts:
        if isinstance(part, dict) and isinstance(part.get("$ref"), str):
            try:
                part = resolve_ref(part["$ref"], root)
            except _Unresolvable:
                continue
        if not isinstance(part, dict):
            continue
        properties.update(part.get("properties") or {})
        required.extend(r for r in part.get("required") or [] if isinstance(r, str))
        for key, value in part.items():
            if key not in ("properties", "required"):
                merged.setdefault(key, value)
    if properties:
        merged["properties"] = properties
    if required:
        merged["required"] = list(dict.fromkeys(required))
    return merged


def _kind(schema: dict[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        real = [k for k in kind if k != "null"]
        kind = real[0] if real else (kind[0] if kind else None)
    if isinstance(kind, str):
        return kind
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    if any(k in schema for k in ("minLength", "maxLength", "pattern", "format")):
        return "string"
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
        return "number"
    return None


def _object(schema: dict[str, Any], root: dict[str, Any], depth: int) -> dict[str, Any]:
    raw = schema.get("properties")
    properties: dict[str, Any] = raw if isinstance(raw, dict) else {}
    listed = schema.get("required")
    required = [r for r in listed if isinstance(r, str)] if isinstance(listed, list) else []
    value: dict[str, Any] = {}
    for name in required:
        value[name] = _example(properties.get(name, {}), root, depth + 1)
    minimum = int(schema.get("minProperties", 0) or 0)
    for name, sub in properties.items():
        if len(value) >= minimum:
            break
        value.setdefault(name, _example(sub, root, depth + 1))
    return value


def _string(schema: dict[str, Any]) -> str:
    fmt = schema.get("format")
    value = _FORMATS.get(fmt, "example") if isinstance(fmt, str) else "example"
    min_length = int(schema.get("minLength", 0) or 0)
    max_length = schema.get("maxLength")
    if len(value) < min_length:
        value = value + "x" * (min_length - len(value))
    if isinstance(max_length, int) and len(value) > max_length:
        value = "x" * max(max_length, min_length, 0) if max_length < len("example") else value[:max_length]
    return value


def _number(schema: dict[str, Any], *, integer: bool) -> int | float:
    step = 1 if integer else 0.5
    low, high = _finite(schema.get("minimum")), _finite(schema.get("maximum"))
    ex_low, ex_high = _finite(schema.get("exclusiveMinimum")), _finite(schema.get("exclusiveMaximum"))
    # Draft 4 spelled exclusive bounds as booleans beside minimum/maximum.
    if schema.get("exclusiveMinimum") is True:
        ex_low, low = low, None
    if schema.get("exclusiveMaximum") is True:
        ex_high, high = high, None
    value = 0.0
    if low is not None:
        value = low
    elif ex_low is not None:
        value = ex_low + step
    if high is not None and value > high:
        value = high
    if ex_high is not None and value >= ex_high:
        value = ex_high - step
    multiple = _finite(schema.get("multipleOf"))
    if multiple is not None and multiple > 0:
        value = math.ceil(value / multiple) * multiple
    if integer:
        return math.ceil(value) if value >= 0 else math.floor(value)
    return value


def _finite(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
