"""Policies: what chooses each action. A policy makes one player per episode; the player is asked for a
move after each observation, and again, with the problem, when its move was invalid. The baselines
(`random`, `first-legal`) need no model, so evaluations work offline."""

import math
import random
import string
from dataclasses import dataclass
from typing import Any, Protocol

from protocol.observations import legal_actions
from protocol.schemas import example_value, resolve
from protocol.tools import example_action, tool_call
from rollout.harness import Brief

__all__ = [
    "BASELINES",
    "FirstLegal",
    "Move",
    "Player",
    "Policy",
    "RandomPolicy",
    "baseline",
    "legal_as_action",
    "random_value",
]


@dataclass(frozen=True)
class Move:
    """A player's answer: the action, or why there is none; the model's reply and its cost."""

    action: dict[str, Any] | None
    reply: str | None = None
    problem: str | None = None
    tokens: int = 0
    model_ms: float = 0.0


class Player(Protocol):
    async def act(self, observation: Any, reward: Any) -> Move: ...

    async def retry(self, problem: str) -> Move: ...


class Policy(Protocol):
    @property
    def kind(self) -> str:
        """ "model", or a baseline's name."""
        ...

    @property
    def label(self) -> str:
        """How the leaderboard names it."""
        ...

    def described(self) -> dict[str, Any]:
        """What the run records of it: never a secret."""
        ...

    def player(self, brief: Brief, seed: int | None) -> Player: ...

    async def aclose(self) -> None: ...


def legal_as_action(choice: Any, brief: Brief) -> dict[str, Any] | None:
    """The action a listed legal action stands for: itself when it is an object, else the value of the
    action's one required field."""
    if isinstance(choice, dict):
        return choice
    schema = brief.action_schema
    if not isinstance(schema, dict):
        return None
    node = resolve(schema, schema)
    properties = node.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    listed = node.get("required")
    listed = listed if isinstance(listed, list) else []
    required = [name for name in listed if name != "metadata"]
    fields = required or [name for name in properties if name != "metadata"]
    return {fields[0]: choice} if len(fields) == 1 else None


def _bound(value: Any, default: float) -> float:
    """A schema's numeric bound, or the default when it gives none (or nonsense)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return default


def random_value(schema: Any, root: dict[str, Any], rng: random.Random, depth: int = 0) -> Any:
    node = resolve(schema, root) if isinstance(schema, dict) else {}
    if depth > 6:
        return example_value(node, root)
    if "const" in node:
        return node["const"]
    for listed in ("enum", "examples"):  # what the schema says a value can be comes before any value of its type
        if isinstance(node.get(listed), list) and node[listed]:
            return rng.choice(node[listed])
    for key in ("anyOf", "oneOf"):
        branches = [b for b in node.get(key) or [] if isinstance(b, dict) and resolve(b, root).get("type") != "null"]
        if branches:
            return random_value(rng.choice(branches), root, rng, depth + 1)
    kind = node.get("type")
    kind = next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind
    if kind == "boolean":
        return rng.random() < 0.5
    if kind in ("integer", "number"):
        low = _bound(node.get("minimum", node.get("exclusiveMinimum")), 0)
        high = _bound(node.get("maximum", node.get("exclusiveMaximum")), low + 9)
        if high < low:
            return example_value(node, root)
        if kind == "integer":
            return rng.randint(math.ceil(low), max(math.ceil(low), math.floor(high)))
        return rng.uniform(low, high)
    if kind == "string":
        shortest = int(max(_bound(node.get("minLength"), 1), 0))
        size = int(min(max(shortest, rng.randint(1, 8)), _bound(node.get("maxLength"), 8), 64))
        return "".join(rng.choice(string.ascii_lowercase) for _ in range(size))
    if kind == "array":
        size = int(min(max(_bound(node.get("minItems"), 0), 0), 16))
        return [random_value(node.get("items", {}), root, rng, depth + 1) for _ in range(size)]
    if kind == "object" or "properties" in node:
        properties = node.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        required = node.get("required")
        required = required if isinstance(required, list) else []
        return {
            name: random_value(properties.get(name, {}), root, rng, depth + 1)
            for name in required
            if isinstance(name, str) and name != "metadata"
        }
    return example_value(node, root)


@dataclass
class _Baseline:
    brief: Brief
    rng: random.Random
    pick_first: bool
    last_observation: Any = None

    async def act(self, observation: Any, reward: Any) -> Move:
        self.last_observation = observation
        legal = [a for a in (legal_as_action(c, self.brief) for c in legal_actions(observation)) if a is not None]
        if legal:
            return Move(legal[0] if self.pick_first else self.rng.choice(legal))
        if self.pick_first:
            action = example_action(self.brief.action_schema, list(self.brief.tools))
            return Move(action, problem=None if action else "the environment describes no action")
        if self.brief.uses_tools:
            tool = self.rng.choice(self.brief.tools)
            arguments = random_value(tool.input_schema or {}, tool.input_schema or {}, self.rng)
            return Move(tool_call(tool.name, arguments if isinstance(arguments, dict) else {}))
        schema = self.brief.action_schema or {}
        value = random_value(schema, schema, self.rng)
        return Move(value if isinstance(value, dict) else None)

    async def retry(self, problem: str) -> Move:
        if self.pick_first:
            return Move(None, problem=problem)  # the same move again would be refused again
        return await self.act(self.last_observation, None)


@dataclass(frozen=True)
class _BaselinePolicy:
    kind: str
    pick_first: bool

    @property
    def label(self) -> str:
        return self.kind

    def described(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def player(self, brief: Brief, seed: int | None) -> Player:
        return _Baseline(brief, random.Random(seed), self.pick_first)  # a game's randomness, not a secret

    async def aclose(self) -> None:
        return None


RandomPolicy = _BaselinePolicy("random", pick_first=False)
FirstLegal = _BaselinePolicy("first-legal", pick_first=True)
BASELINES = {p.kind: p for p in (RandomPolicy, FirstLegal)}


def baseline(name: str) -> Policy:
    return BASELINES[name]
