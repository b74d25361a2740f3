"""A reset's arguments as the door's generated reset tool takes them, and as an MCP URL's query gives the first."""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ResetProblem", "reset_arguments", "reset_options"]


@dataclass(frozen=True)
class ResetProblem:
    """What is wrong with a reset's arguments: said for people, and as a code (reset_argument_unknown,
    reset_argument_invalid, split_required) with the argument it is about, for programs."""

    message: str
    code: str
    argument: str

    @property
    def data(self) -> dict[str, str]:
        return {"code": self.code, "argument": self.argument}


def _invalid(name: str, message: str) -> tuple[dict[str, Any], ResetProblem]:
    return {}, ResetProblem(message, "reset_argument_invalid", name)


def reset_options(arguments: dict[str, Any]) -> tuple[dict[str, Any], ResetProblem | None]:
    """The reset's keyword arguments from the generated tool's: its options, and the seed; or what is wrong."""
    known = {"seed", "split", "index", "dataset", "options"}
    unknown = sorted(set(arguments) - known)
    if unknown:
        takes = ", ".join(sorted(known))
        message = f"reset takes {takes}, not {', '.join(unknown)}; put the environment's own arguments in options"
        return {}, ResetProblem(message, "reset_argument_unknown", unknown[0])
    seed, index, options = arguments.get("seed"), arguments.get("index"), arguments.get("options")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        return _invalid("seed", f"seed is a whole number, not {seed!r}")
    if index is not None and (not isinstance(index, int) or isinstance(index, bool) or index < 0):
        return _invalid("index", f"index is a whole number from 0, not {index!r}")
    if options is not None and not isinstance(options, dict):
        return _invalid("options", "options is an object of the environment's reset arguments")
    for name in ("split", "dataset"):
        if arguments.get(name) is not None and not isinstance(arguments[name], str):
            return _invalid(name, f"{name} is a name, not {arguments[name]!r}")
    if index is not None and arguments.get("split") is None:
        return {}, ResetProblem("an index picks a task of a split: name the split too", "split_required", "index")
    return {**(options or {}), **({"seed": seed} if seed is not None else {})}, None


def reset_arguments(query: Mapping[str, str]) -> tuple[dict[str, Any], ResetProblem | None]:
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
                return _invalid(name, f"the URL's {name} is a whole number, not {query[name]!r}")
    if query.get("options"):
        try:
            arguments["options"] = json.loads(query["options"])
        except ValueError:
            return _invalid(
                "options", "the URL's options is a JSON object of the environment's reset arguments; not JSON"
            )
    _, problem = reset_options(arguments)
    if problem is None:
        return arguments, None
    return arguments, ResetProblem(f"the URL's reset arguments: {problem.message}", problem.code, problem.argument)
