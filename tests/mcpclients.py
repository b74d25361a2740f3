"""The official `mcp` SDK's client on an endpoint's MCP URL, as an agent harness opens it, and what tests read of
its results."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult, ErrorData, TextContent


@asynccontextmanager
async def mcp(url: str, headers: dict[str, str] | None = None, *, close: bool = True) -> AsyncIterator[ClientSession]:
    """An initialized session on `{url}/mcp`; leaving it ends the session (DELETE), as the SDK does, unless `close`
    is false: then it is left open, as Claude Code and opencode leave theirs."""
    async with (
        httpx.AsyncClient(headers=headers or {}, timeout=httpx.Timeout(60, read=300)) as http,
        streamable_http_client(f"{url}/mcp", http_client=http, terminate_on_close=close) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def structured(result: CallToolResult) -> dict[str, Any]:
    """The result's structuredContent: reward, done and the observation."""
    assert result.structuredContent is not None, result.content
    return result.structuredContent


def _leaves(group: BaseExceptionGroup[McpError]) -> list[McpError]:
    found: list[McpError] = []
    for inner in group.exceptions:
        found += _leaves(inner) if isinstance(inner, BaseExceptionGroup) else [inner]
    return found


async def refusal(url: str) -> ErrorData:
    """Why a session could not be opened (the SDK's client raises it from its task group): its JSON-RPC error."""
    refused: list[McpError] = []
    try:
        async with mcp(url):
            pass
    except* McpError as group:
        refused += _leaves(group)
    assert refused, "the session was opened"
    return refused[0].error
