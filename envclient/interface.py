"""What a running environment says about itself: metadata, schemas, MCP tools and Task API splits, in one model.

Every part is optional: older servers lack the Task API, most lack MCP, and a broken one
is a problem to show, not an error. The parts are asked for at once, through one
outbound session (its guard, its pins, its size and time limits).
"""

import asyncio
import json
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote

from core.errors import RefusedURLError
from core.outbound import OutboundSession
from protocol.frames import rpc
from protocol.schemas import Schema
from protocol.tools import Tool, parse_tools

__all__ = ["MAX_SPLITS", "Interface", "Split", "read_interface"]

MAX_SPLITS = 10  # splits counted per environment
FIRST_TASKS = 3  # tasks shown of each split


@dataclass(frozen=True)
class Split:
    name: str
    type: str = ""
    count: int | None = None
    first: tuple[Any, ...] = ()  # its first tasks, as the Task API gives them


@dataclass(frozen=True)
class Interface:
    metadata: dict[str, Any] | None = None
    schema: dict[str, Any] | None = None  # GET /schema: action, observation, state (and reset_observation)
    tools: tuple[Tool, ...] | None = None  # None: unknown; (): the server has no MCP tools
    task_env: str | None = None  # the Task API name, when it serves one
    splits: tuple[Split, ...] = ()
    problems: list[str] = field(default_factory=list, compare=False)

    @property
    def action_schema(self) -> Schema | None:
        action = (self.schema or {}).get("action")
        return action if isinstance(action, dict) else None

    def or_else(self, other: "Interface") -> "Interface":
        """This interface, with what it lacks taken from other, and the problems of both."""
        return replace(
            self,
            metadata=self.metadata or other.metadata,
            schema=self.schema or other.schema,
            tools=self.tools or other.tools,
            task_env=self.task_env or other.task_env,
            splits=self.splits or other.splits,
            problems=[*self.problems, *other.problems],
        )


class _Unanswered(Exception):
    """A request answered with something other than the JSON it asked for."""


async def _json(outbound: OutboundSession, method: str, url: str, **options: Any) -> Any:
    fetched = await outbound.fetch(method, url, **options)
    if fetched.status != 200:
        raise _Unanswered(f"HTTP {fetched.status}")
    if fetched.cut:
        raise _Unanswered(f"the answer is over {outbound.max_bytes} bytes")
    try:
        return json.loads(fetched.body)
    except ValueError as exc:
        raise _Unanswered("the answer is not JSON") from exc


async def _object(outbound: OutboundSession, url: str) -> dict[str, Any]:
    value = await _json(outbound, "GET", url)
    if not isinstance(value, dict):
        raise _Unanswered("the answer is not an object")
    return value


async def _tools(outbound: OutboundSession, base: str) -> tuple[Tool, ...] | None:
    answer = await _json(outbound, "POST", f"{base}/mcp", json=rpc("tools/list", {}))
    if not isinstance(answer, dict):
        return None
    if isinstance(answer.get("error"), dict):
        return ()  # "Environment does not support MCP"
    result = answer.get("result")
    return tuple(parse_tools(result)) if isinstance(result, dict) and isinstance(result.get("tools"), list) else None


async def _tasks(outbound: OutboundSession, base: str) -> tuple[str | None, tuple[Split, ...]]:
    names = await _json(outbound, "GET", f"{base}/list_environments")
    if not isinstance(names, list) or not names or not isinstance(names[0], str):
        return None, ()
    env_path = f"{base}/{quote(names[0], safe='')}"
    try:
        listed = await _json(outbound, "GET", f"{env_path}/splits")
    except _Unanswered:
        return None, ()  # the route exists on every 0.10 server; 501 means no tasks
    splits = []
    for item in listed[:MAX_SPLITS] if isinstance(listed, list) else []:
        item = {"name": item} if isinstance(item, str) else item
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            splits.append(Split(item["name"], str(item.get("type") or "")))

    async def counted(split: Split) -> Split:
        asked = await asyncio.gather(
            _json(outbound, "POST", f"{env_path}/num_tasks", json={"split": split.name}),
            _json(
                outbound, "POST", f"{env_path}/task_range", json={"split": split.name, "start": 0, "stop": FIRST_TASKS}
            ),
            return_exceptions=True,
        )
        number, first = (a if isinstance(a, dict) else {} for a in asked)
        count = number.get("num_tasks")
        tasks = first.get("tasks")
        return replace(
            split,
            count=count if isinstance(count, int) and not isinstance(count, bool) else None,
            first=tuple(tasks[:FIRST_TASKS]) if isinstance(tasks, list) else (),
        )

    return names[0], tuple(await asyncio.gather(*(counted(s) for s in splits)))


async def read_interface(base: str, outbound: OutboundSession) -> Interface:
    """Ask a live environment for its metadata, schema, tools and tasks, all at once."""
    base = base.rstrip("/")
    metadata, schema, tools, tasks = await asyncio.gather(
        _object(outbound, f"{base}/metadata"),
        _object(outbound, f"{base}/schema"),
        _tools(outbound, base),
        _tasks(outbound, base),
        return_exceptions=True,
    )
    problems = [f"GET {base}/schema failed: {_reason(schema)}"] if isinstance(schema, BaseException) else []
    task_env, splits = tasks if not isinstance(tasks, BaseException) else (None, ())
    return Interface(
        metadata=None if isinstance(metadata, BaseException) else metadata,
        schema=None if isinstance(schema, BaseException) else schema,
        tools=None if isinstance(tools, BaseException) else tools,
        task_env=task_env,
        splits=splits,
        problems=problems,
    )


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RefusedURLError | _Unanswered):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
