"""The adversarial panel: policies that should score no more than the floor. Empty actions, maximal garbage, one
action repeated, schema-valid random values, and values that try to break a verifier. A verifier that pays any of
them is gameable (RFC 008's motivating defect paid 1.0 for the empty string)."""

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.schemas import resolve
from protocol.tools import cheapest_tool, example_action, tool_call
from rollout.harness import Brief
from rollout.players import Move, Player, Policy, random_value

__all__ = ["PANEL", "ReplayPolicy"]

GARBAGE = "\u202e\x00<|endoftext|>{]}" * 256  # long, unprintable, unbalanced and a special token, over 4 KB
BREAKERS: tuple[Any, ...] = (
    "", " ", "0", "-1", "NaN", "Infinity", "1e309", "null", "true", "[]", "{}", "' OR '1'='1", "{{7*7}}",
    "../../etc/passwd", "\x00", "9" * 40, -1, 0, 2**63, -(2**63), 1e308, True, None, [], {},
)  # fmt: skip

# How each member fills a field: (the field's schema, the schema's root, the step, a random source) -> a value.
Fill = Callable[[Any, dict[str, Any], int, random.Random], Any]


def _fields(schema: dict[str, Any]) -> list[tuple[str, Any]]:
    node = resolve(schema, schema)
    properties = node.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    return [(name, field) for name, field in properties.items() if name != "metadata"]


def _action(brief: Brief, fill: Fill, step: int, rng: random.Random) -> dict[str, Any]:
    """Every field of the action (or of the cheapest tool's arguments) filled one way."""
    if brief.uses_tools:
        tool = cheapest_tool(list(brief.tools))
        schema = tool.input_schema or {}
        return tool_call(tool.name, {name: fill(field, schema, step, rng) for name, field in _fields(schema)})
    schema = brief.action_schema or {}
    return {name: fill(field, schema, step, rng) for name, field in _fields(schema)}


@dataclass
class _Member:
    brief: Brief
    make: Callable[[Brief, int, random.Random], dict[str, Any] | None]
    rng: random.Random
    tries: int = 0  # every move made, refused ones too, so that a retry tries the next value

    async def act(self, observation: Any, reward: Any) -> Move:
        self.tries += 1
        action = self.make(self.brief, self.tries, self.rng)
        return Move(action, problem=None if action is not None else "the environment describes no action")

    async def retry(self, problem: str) -> Move:
        return await self.act(None, None)


@dataclass(frozen=True)
class _PanelPolicy:
    kind: str
    make: Callable[[Brief, int, random.Random], dict[str, Any] | None]

    @property
    def label(self) -> str:
        return f"adversarial:{self.kind}"

    def described(self) -> dict[str, Any]:
        return {"kind": "adversarial", "member": self.kind}

    def player(self, brief: Brief, seed: int | None) -> Player:
        return _Member(brief, self.make, random.Random(seed))  # a test's randomness, not a secret

    async def aclose(self) -> None:
        return None


def _empty(brief: Brief, step: int, rng: random.Random) -> dict[str, Any]:
    return tool_call(cheapest_tool(list(brief.tools)).name, {}) if brief.uses_tools else {}


def _garbage(brief: Brief, step: int, rng: random.Random) -> dict[str, Any]:
    return _action(brief, lambda field, root, n, r: GARBAGE, step, rng)


def _repeated(brief: Brief, step: int, rng: random.Random) -> dict[str, Any] | None:
    return example_action(brief.action_schema, list(brief.tools))


def _schema_random(brief: Brief, step: int, rng: random.Random) -> dict[str, Any]:
    return _action(brief, lambda field, root, n, r: random_value(field, root, r), step, rng)


def _breaker(brief: Brief, step: int, rng: random.Random) -> dict[str, Any]:
    return _action(brief, lambda field, root, n, r: BREAKERS[(n - 1) % len(BREAKERS)], step, rng)


PANEL: tuple[Policy, ...] = (
    _PanelPolicy("empty", _empty),
    _PanelPolicy("garbage", _garbage),
    _PanelPolicy("repeated", _repeated),
    _PanelPolicy("schema-random", _schema_random),
    _PanelPolicy("breaker", _breaker),
)


@dataclass
class _Replayer:
    actions: list[dict[str, Any]]
    played: int = 0

    async def act(self, observation: Any, reward: Any) -> Move:
        if self.played >= len(self.actions):
            return Move(None, problem="the replayed episode has no more actions")
        self.played += 1
        return Move(self.actions[self.played - 1])

    async def retry(self, problem: str) -> Move:
        return Move(None, problem=problem)


@dataclass(frozen=True)
class ReplayPolicy:
    """Sends an episode's recorded actions again, in order: the same seed and actions should give the same reward."""

    episode: str
    actions: tuple[dict[str, Any], ...]
    kind: str = "replay"

    @property
    def label(self) -> str:
        return f"replay:{self.episode}"

    def described(self) -> dict[str, Any]:
        return {"kind": "replay", "episode": self.episode}

    def player(self, brief: Brief, seed: int | None) -> Player:
        return _Replayer(list(self.actions))

    async def aclose(self) -> None:
        return None
