"""A reset's arguments as the door's generated reset tool takes them, and as an MCP URL's query gives the first."""

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["reset_arguments", "reset_options"]


def reset_options(arguments: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The reset's keyword arguments from the generated tool's: its options, and the seed; or what is wrong."""
    known = {"seed", "split", "index", "dataset", "options"}
    unknown = sorted(set(arguments) - known)
    if unknown:
        takes = ", ".join(sorted(known))
        return {}, f"reset takes {takes}, not {', '.join(unknown)}; put the environment's own arguments in options"
    seed, index, options = arguments.get("seed"), arguments.get("index"), arguments.get("options")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        return {}, f"seed is a whole number, not {seed!r}"
    if index is not None and (not isinstance(index, int) or isinstance(index, bool) or index < 0):
        return {}, f"index is a whole number from 0, not {index!r}"
    if options is not None and not isinstance(options, dict):
        return {}, "options is an object of the environment's reset arguments"
    for name in ("split", "dataset"):
        if arguments.get(name) is not None and not isinstance(arguments[name], str):
            return {}, f"{name} is a name, not {arguments[name]!r}"
    if index is not None and arguments.get("split") is None:
        return {}, "an index picks a task of a split: name the split too"
    return {**(options or {}), **({"seed": seed} if seed is not None else {})}, None


def reset_arguments(query: Mapping[str, str]) -> tuple[dict[str, Any], str | None]:
    """The first reset's arguments from an MCP URL's query, as the generated reset tool takes them (seed, split,
    index, dataset; options as a JSON object), so that any client can start a session from a seed or a task:
    `.../mcp?seed=7`, `.../mcp?split=test&index=3`. Other parameters are not the door's."""
    arguments: dict[str, Any] = {}
    for name in ("split", "dataset"):
        if query.get(name):
            arguments[name] = query[name]
    for name in ("seed", "index"):
        if query.get(name):
            try:
                arguments[name] = int(query[name])
            except ValueError:
                return {}, f"the URL's {name} is a whole number, not {query[name]!r}"
    if query.get("options"):
        try:
            arguments["options"] = json.loads(query["options"])
        except ValueError:
            return {}, "the URL's options is a JSON object of the environment's reset arguments; it is not JSON"
    _, problem = reset_options(arguments)
    return arguments, (f"the URL's reset arguments: {problem}" if problem else None)
