"""The harness: how a model meets an environment. The system prompt it is given, the user messages
observations become, and the rule that reads an action out of its reply.

A schema action is a JSON object in the reply (fenced or bare) that validates against the
environment's `/schema`; an MCP environment's action is the model's native tool call, checked
against the tool's input schema. Anything else is an `InvalidReply`, whose message goes back to
the model so it can try again.
"""

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from protocol.observations import image_data_uri, legal_actions
from protocol.tools import Tool, takes_tool_calls, tool_call

__all__ = [
    "HARNESS_VERSION",
    "Brief",
    "InvalidReply",
    "feedback_text",
    "observation_content",
    "read_action",
    "read_tool_call",
    "readme_excerpt",
    "system_prompt",
]

HARNESS_VERSION = "1"
MAX_SECTION_CHARS = 3_000
MAX_SCHEMA_CHARS = 6_000
MAX_OBSERVATION_CHARS = 12_000
MAX_REPLY_CHARS = 64_000  # a longer reply is not read for an action
_SECTIONS = ("agent sees", "observation", "action", "reward", "goal", "rules")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.MULTILINE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class InvalidReply(Exception):
    """A reply that carries no valid action; the message says what to fix."""


@dataclass(frozen=True)
class Brief:
    """What the harness knows of an environment before the first step."""

    name: str
    readme: str = ""
    action_schema: dict[str, Any] | None = None
    tools: tuple[Tool, ...] = ()
    prompt: str | None = None  # the user's own system prompt, instead of the one made here

    @property
    def uses_tools(self) -> bool:
        return bool(self.tools) and (self.action_schema is None or takes_tool_calls(self.action_schema))

    def chat_tools(self) -> list[dict[str, Any]]:
        """The tools as chat completions take them."""
        return [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema or {"type": "object"},
                },
            }
            for t in self.tools
        ]


def _strip_front_matter(text: str) -> str:
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end != -1:
            return text[end + 4 :]
    return text


def readme_excerpt(readme: str) -> str:
    """The README's parts an agent needs (what it sees, its actions, rewards, rules), each bounded;
    without such headings, the README's start."""
    body = _strip_front_matter(readme)
    headings = list(_HEADING.finditer(body))
    parts = []
    for i, heading in enumerate(headings):
        title = heading.group(2).lower()
        if not any(word in title for word in _SECTIONS):
            continue
        level = len(heading.group(1))
        end = next((h.start() for h in headings[i + 1 :] if len(h.group(1)) <= level), len(body))
        parts.append(body[heading.start() : end].strip()[:MAX_SECTION_CHARS])
    if not parts:
        return body.strip()[:MAX_SECTION_CHARS]
    return "\n\n".join(parts)


def system_prompt(brief: Brief) -> str:
    """The system message: the user's own prompt when given, else one made from the README, the action
    schema and the tools."""
    if brief.prompt:
        return brief.prompt
    lines = [f"You are an agent playing the environment {brief.name}. Each user message is an observation."]
    excerpt = readme_excerpt(brief.readme)
    if excerpt:
        lines += ["", "From the environment's README:", "", excerpt]
    if brief.uses_tools:
        lines += ["", "Act by calling exactly one of the tools you are given each turn."]
    else:
        schema = json.dumps(brief.action_schema or {"type": "object"}, ensure_ascii=False)[:MAX_SCHEMA_CHARS]
        lines += [
            "",
            "Act by replying with one JSON object, the action, that validates against this JSON schema:",
            schema,
            "Put the JSON object last in your reply, in a ```json fenced block. Do not leave out required fields.",
        ]
    return "\n".join(lines)


def observation_content(observation: Any, reward: Any = None) -> list[dict[str, Any]]:
    """A user message's content parts for an observation: its fields as JSON text (images replaced by
    a note) and each image as an image part."""
    images: list[dict[str, Any]] = []
    shown: Any = observation
    if isinstance(observation, dict):
        shown = {}
        for key, value in observation.items():
            uri = image_data_uri(value) if isinstance(value, str) else None
            if uri is None:
                shown[key] = value
            else:
                shown[key] = f"<image {len(images) + 1}, attached>"
                images.append({"type": "image_url", "image_url": {"url": uri}})
    text = json.dumps(shown, ensure_ascii=False, default=str)
    if len(text) > MAX_OBSERVATION_CHARS:
        text = text[:MAX_OBSERVATION_CHARS] + " ... (cut)"
    lead = "Observation" if reward is None else f"Reward {reward}. Observation"
    return [{"type": "text", "text": f"{lead}: {text}"}, *images]


def feedback_text(problem: str) -> str:
    return f"That was not a valid action: {problem}. Try again with one valid action."


@lru_cache(maxsize=64)
def _validator(schema_text: str) -> Draft202012Validator | None:
    schema = json.loads(schema_text)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return None  # a broken schema checks nothing; the server still validates
    return Draft202012Validator(schema)


def _problems(schema: dict[str, Any] | None, value: Any) -> str | None:
    if not schema:
        return None
    validator = _validator(json.dumps(schema, sort_keys=True))
    if validator is None:
        return None
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    if not errors:
        return None
    first = errors[0]
    where = ".".join(str(p) for p in first.path)
    return f"{where}: {first.message}" if where else first.message


def _json_objects(text: str) -> list[str]:
    """Candidate JSON objects in a reply, last first: fenced blocks, then bare balanced braces."""
    fenced = [m.group(1).strip() for m in _FENCE.finditer(text)]
    bare: list[str] = []
    depth, start, in_string, escaped = 0, -1, False, False
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"' and depth:
            in_string = True
        elif char == "{":
            if depth == 0:
                start = i
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                bare.append(text[start : i + 1])
    return [*reversed(fenced), *reversed(bare)]


def read_action(reply: str | None, brief: Brief, observation: Any = None) -> dict[str, Any]:
    """The action a reply gives: its last JSON object that validates against the action schema; a
    bare legal action the observation listed is taken as well."""
    if not reply or not reply.strip():
        raise InvalidReply("the reply was empty; reply with a JSON object")
    if len(reply) > MAX_REPLY_CHARS:
        raise InvalidReply(f"the reply was {len(reply):,} characters; keep it under {MAX_REPLY_CHARS:,}")
    candidates = _json_objects(reply)
    if not candidates:
        legal = [a for a in legal_actions(observation) if isinstance(a, str) and a == reply.strip()]
        raise InvalidReply(
            "no JSON object was found in the reply"
            + (f" (the legal action {legal[0]!r} needs its field)" if legal else "")
        )
    first_problem = None
    for text in candidates:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            first_problem = first_problem or f"the JSON does not parse: {exc.msg} at character {exc.pos}"
            continue
        if not isinstance(value, dict):
            first_problem = first_problem or "the JSON is not an object"
            continue
        problem = _problems(brief.action_schema, value)
        if problem is None:
            return value
        first_problem = first_problem or f"the action does not fit the schema: {problem}"
    raise InvalidReply(first_problem or "no valid action was found")


def read_tool_call(name: str, arguments: Any, brief: Brief) -> dict[str, Any]:
    """The MCP tool-call action for a model's tool call, checked against the tool's input schema."""
    tool = next((t for t in brief.tools if t.name == name), None)
    if tool is None:
        known = ", ".join(t.name for t in brief.tools)
        raise InvalidReply(f"there is no tool {name!r}; the tools are {known}")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise InvalidReply(f"the arguments of {name} are not JSON: {exc.msg}") from exc
    if not isinstance(arguments, dict):
        raise InvalidReply(f"the arguments of {name} must be a JSON object")
    problem = _problems(tool.input_schema, arguments)
    if problem is not None:
        raise InvalidReply(f"the arguments of {name} do not fit its schema: {problem}")
    return tool_call(name, arguments)
