"""How the harness plays an MCP environment: through the endpoint's MCP door, as any agent harness does.

An episode is one MCP session (the official `mcp` SDK's client). Its initialize opens an environment session on a
replica, and the door resets it with the episode's seed and task, given in the URL; the reset's answer comes back
in the initialize result. Each of the model's tool calls is then a `tools/call`, whose structuredContent carries
the reward, done and the observation. The door records the session as an agent session of the endpoint, named
after the evaluation.
"""

import json
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult, Implementation, TextContent

from core.outbound import OutboundSession
from protocol.observations import refusal
from protocol.tools import OPENING_META

__all__ = ["DoorClient", "Outcome"]


@dataclass(frozen=True)
class Outcome:
    """What a reset or a step answered, as openenv's clients give it."""

    observation: Any
    reward: Any
    done: bool


def _outcome(envelope: Any, result: CallToolResult | None = None) -> Outcome:
    """The reward, done and observation of a result's structuredContent; a tool error is a refused move."""
    envelope = envelope if isinstance(envelope, dict) else {}
    observation = envelope.get("observation")
    observation = observation if isinstance(observation, dict) else {"value": observation}
    if result is not None and result.isError and refusal(observation) is None:
        said = " ".join(c.text for c in result.content if isinstance(c, TextContent))
        observation = {**observation, "error": said or "the tool failed"}
    return Outcome(observation, envelope.get("reward"), bool(envelope.get("done")))


class DoorClient:
    """One episode's MCP session on `{url}/mcp`: reset opens it, step calls a tool, close ends it (DELETE)."""

    last_error: dict[str, Any] | None = None  # why the door refused a call, when it did

    def __init__(self, url: str, outbound: OutboundSession, *, client_name: str, message_timeout_s: float) -> None:
        self.url, self.outbound = url.rstrip("/"), outbound
        self.client_name, self.timeout_s = client_name, message_timeout_s
        self._stack = AsyncExitStack()
        self._session: ClientSession | None = None

    async def reset(self, **options: Any) -> Outcome:
        seed = options.pop("seed", None)
        query = {
            **({"seed": seed} if seed is not None else {}),
            **({"options": json.dumps(options)} if options else {}),
        }
        url = f"{self.url}/mcp" + (f"?{urlencode(query)}" if query else "")
        http = await self._stack.enter_async_context(self.outbound.new_client(self.timeout_s))
        read, write, _ = await self._stack.enter_async_context(streamable_http_client(url, http_client=http))
        session = await self._stack.enter_async_context(
            ClientSession(
                read,
                write,
                read_timeout_seconds=timedelta(seconds=self.timeout_s),
                client_info=Implementation(name=self.client_name, version=""),
            )
        )
        try:
            opened = await session.initialize()
        except McpError as exc:
            self.last_error = {"message": exc.error.message}
            raise RuntimeError(exc.error.message) from exc
        self._session = session
        opening = (opened.meta or {}).get(OPENING_META)
        if opening is None:
            raise RuntimeError(f"{self.url}/mcp began no episode: it is not envhub's MCP door")
        return _outcome(opening)

    async def step(self, action: dict[str, Any]) -> Outcome:
        """Call the tool the action names (a call_tool action, as read from the model's tool call)."""
        assert self._session is not None, "reset opens the session"
        try:
            result = await self._session.call_tool(action["tool_name"], action.get("arguments") or {})
        except McpError as exc:  # the session is gone (a tool's own failure is a result)
            raise ConnectionError(exc.error.message) from exc
        return _outcome(result.structuredContent, result)

    async def close(self) -> None:
        self._session = None
        await self._stack.aclose()
