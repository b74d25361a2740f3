"""What a running environment says about itself: schemas, MCP tools and Task API splits.

Read from the catalog record when the health monitor cached it, otherwise asked of the
live URL (GET /schema, POST /mcp tools/list, the Task API routes). Every answer is
optional: older servers lack the Task API, most lack MCP, and a broken one is a problem
to show, not an error.
"""

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from catalog.models import EnvironmentDetail
from core.errors import RefusedURLError
from core.outbound import OutboundGuard, OutboundSession

PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class Split:
    name: str
    type: str
    count: int | None


@dataclass(frozen=True)
class LiveInfo:
    url: str | None = None
    schema: dict[str, Any] | None = None
    tools: list[Tool] = field(default_factory=list)
    task_env: str | None = None
    splits: list[Split] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def or_else(self, other: "LiveInfo") -> "LiveInfo":
        """This information, with what it lacks taken from other, and the problems of both."""
        return LiveInfo(
            url=self.url or other.url,
            schema=self.schema or other.schema,
            tools=self.tools or other.tools,
            task_env=self.task_env or other.task_env,
            splits=self.splits or other.splits,
            problems=[*self.problems, *other.problems],
        )

    @property
    def action_schema(self) -> dict[str, Any] | None:
        action = (self.schema or {}).get("action")
        return action if isinstance(action, dict) else None


def parse_tools(payload: Any) -> list[Tool]:
    """Tools from any of openenv's three tool-list shapes (camelCase or snake_case schemas)."""
    items = payload.get("tools") if isinstance(payload, dict) else payload
    tools = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        schema = item.get("inputSchema", item.get("input_schema"))
        tools.append(Tool(item["name"], str(item.get("description") or ""), schema if isinstance(schema, dict) else {}))
    return tools


def parse_splits(payload: Any, counts: dict[str, int | None] | None = None) -> list[Split]:
    splits = []
    for item in payload if isinstance(payload, list) else []:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        count = item.get("num_tasks", item.get("count"))
        if counts is not None and item["name"] in counts:
            count = counts[item["name"]]
        splits.append(Split(item["name"], str(item.get("type") or ""), count if isinstance(count, int) else None))
    return splits


def from_record(environment: EnvironmentDetail, url: str | None = None) -> LiveInfo:
    """What the catalog already knows, as cached by the health monitor."""
    tasks = environment.tasks or {}
    return LiveInfo(
        url=url,
        schema=environment.env_schema,
        tools=parse_tools(environment.tools or []),
        task_env=tasks.get("env_name") if isinstance(tasks.get("env_name"), str) else None,
        splits=parse_splits(tasks.get("splits")),
    )


class _Refused(Exception):
    """A probe request answered with something other than what it asked for."""


async def _json(outbound: OutboundSession, method: str, url: str, **kwargs: Any) -> Any:
    fetched = await outbound.fetch(method, url, **kwargs)
    if fetched.status != 200:
        raise _Refused(f"HTTP {fetched.status}")
    if fetched.cut:
        raise _Refused(f"the answer is over {outbound.max_bytes} bytes")
    return json.loads(fetched.body)


async def _schema(outbound: OutboundSession, url: str) -> dict[str, Any]:
    schema = await _json(outbound, "GET", f"{url}/schema")
    if not isinstance(schema, dict):
        raise ValueError("GET /schema did not return an object")
    return schema


async def _tools(outbound: OutboundSession, url: str) -> list[Tool]:
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    answer = await _json(outbound, "POST", f"{url}/mcp", json=request)
    return parse_tools(answer.get("result")) if isinstance(answer, dict) else []


async def _tasks(outbound: OutboundSession, url: str) -> tuple[str | None, list[Split]]:
    names = await _json(outbound, "GET", f"{url}/list_environments")
    if not isinstance(names, list) or not names or not isinstance(names[0], str):
        return None, []
    env = quote(names[0], safe="")
    try:
        splits = parse_splits(await _json(outbound, "GET", f"{url}/{env}/splits"))
    except _Refused:
        return None, []  # the route exists on every 0.10 server; 501 means no tasks

    async def count(split: Split) -> tuple[str, int | None]:
        try:
            answer = await _json(outbound, "POST", f"{url}/{env}/num_tasks", json={"split": split.name})
        except (_Refused, ValueError):
            return split.name, None
        number = answer.get("num_tasks") if isinstance(answer, dict) else None
        return split.name, number if isinstance(number, int) else None

    counts = dict(await asyncio.gather(*(count(s) for s in splits)))
    return names[0], [Split(s.name, s.type, counts.get(s.name)) for s in splits]


def live_session(
    guard: OutboundGuard,
    *trusted: str,
    credentials: dict[str, dict[str, str]] | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> OutboundSession:
    """The outbound session for one live URL: the trusted prefixes (envhub's own gateway) skip the
    guard, every other URL goes through it (like checks and registration), and every request and
    WebSocket of the session goes to the address the guard checked."""
    return OutboundSession(guard.with_trusted(*trusted), timeout_s=timeout_s, credentials=credentials or {})


async def outbound_refusal(outbound: OutboundSession, url: str) -> str | None:
    """Why the session may not connect to a URL, or None; the URL's host is pinned from here on."""
    try:
        await outbound.pin(outbound.guard.normalize(url))
    except RefusedURLError as exc:
        return exc.message
    return None


async def probe(url: str, outbound: OutboundSession) -> LiveInfo:
    """Ask a live environment for its schema, tools and tasks, all at once, through the session's pins."""
    url = url.rstrip("/")
    schema, tools, tasks = await asyncio.gather(
        _schema(outbound, url), _tools(outbound, url), _tasks(outbound, url), return_exceptions=True
    )
    problems = []
    if isinstance(schema, BaseException):
        problems.append(f"GET {url}/schema failed: {_reason(schema)}")
    task_env, splits = tasks if not isinstance(tasks, BaseException) else (None, [])
    return LiveInfo(
        url=url,
        schema=None if isinstance(schema, BaseException) else schema,
        tools=[] if isinstance(tools, BaseException) else tools,
        task_env=task_env,
        splits=splits,
        problems=problems,
    )


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RefusedURLError | _Refused):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
