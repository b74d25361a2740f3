"""The MCP Streamable HTTP transport's messages (spec 2025-06-18 and 2025-11-25): a request and its reply, which
requests are the standard transport's, JSON-RPC messages read and written, and answers as JSON or as SSE events."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp.server.streamable_http import (
    CONTENT_TYPE_JSON,
    CONTENT_TYPE_SSE,
    MCP_PROTOCOL_VERSION_HEADER,
    MCP_SESSION_ID_HEADER,
)
from mcp.types import (
    JSONRPCMessage,
    JSONRPCRequest,
)
from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

from gateway.jsonbody import TooDeep, read_json

__all__ = [
    "SSE_HEADERS",
    "HttpReply",
    "HttpRequest",
    "encoded",
    "is_standard",
    "json_reply",
    "jsonrpc_message",
    "rpc_error",
    "rpc_result",
    "sse_once",
    "sse_streamed",
    "wants_sse",
]

KEEPALIVE_S = 15.0  # an SSE answer still being worked on sends a comment this often, so proxies keep it open
SSE_HEADERS = {"content-type": CONTENT_TYPE_SSE, "cache-control": "no-cache"}
# Standard methods OpenEnv's own JSON-RPC does not know: only a standard client sends them.
_STANDARD_METHODS = ("initialize", "ping", "server/discover")


@dataclass(frozen=True)
class HttpRequest:
    method: str
    headers: Mapping[str, str]  # case-insensitive, as the gateway's server gives them
    body: bytes
    user: str | None = None  # who the bearer proved to be, if anyone
    query: Mapping[str, str] = field(default_factory=dict)  # the URL's: a session's first reset (reset_arguments)


@dataclass
class HttpReply:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | AsyncIterator[bytes] = b""


def is_standard(method: str, headers: Mapping[str, str], body: bytes) -> bool:
    """Whether a request to an endpoint's /mcp is the standard transport's (the door's) rather than OpenEnv's own
    JSON-RPC (bare tools/list and tools/call, openenv/session/*), which the gateway passes on unchanged."""
    if method != "POST":
        return method in ("GET", "DELETE")
    if MCP_SESSION_ID_HEADER in headers or MCP_PROTOCOL_VERSION_HEADER in headers:
        return True
    try:
        message = read_json(body)
    except TooDeep:
        return True  # the door refuses it: no server need read it
    except ValueError:
        return False
    called = message.get("method") if isinstance(message, dict) else None
    return isinstance(called, str) and (called in _STANDARD_METHODS or called.startswith("notifications/"))


def rpc_error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def rpc_result(request_id: Any, result: BaseModel) -> dict[str, Any]:
    """A JSON-RPC result; the model stays one until the message is written (`_encoded`)."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def jsonrpc_message(raw: Any) -> Any:
    """The JSON-RPC message (a request, a notification, a response or an error); ValidationError if none. A request,
    which nearly every message is, is read as one at once rather than tried against each kind in turn."""
    if isinstance(raw, dict) and "method" in raw and "id" in raw:
        with contextlib.suppress(ValidationError):
            return JSONRPCRequest.model_validate(raw)
    return JSONRPCMessage.model_validate(raw).root


def encoded(message: dict[str, Any]) -> bytes:
    """A message as JSON, its models by their aliases without their unset (None) fields, as MCP writes them;
    pydantic's serializer writes the whole message at once (five times as fast as dumping the models, then json)."""
    return to_json(message, by_alias=True, exclude_none=True)


def json_reply(status: int, message: dict[str, Any] | None, headers: dict[str, str] | None = None) -> HttpReply:
    body = b"" if message is None else encoded(message)
    kind = {"content-type": CONTENT_TYPE_JSON} if message is not None else {}
    return HttpReply(status, kind | (headers or {}), body)


def wants_sse(accept: str) -> bool:
    """SSE when the client ranks it above JSON (or takes SSE alone); JSON when it takes both alike."""
    ranks: dict[str, float] = {}
    for part in accept.split(","):
        kind, *params = (p.strip() for p in part.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                with contextlib.suppress(ValueError):
                    quality = float(value)
        ranks[kind.lower()] = max(ranks.get(kind.lower(), 0.0), quality)
    json_rank = max(ranks.get(CONTENT_TYPE_JSON, 0.0), ranks.get("application/*", 0.0), ranks.get("*/*", 0.0))
    return ranks.get(CONTENT_TYPE_SSE, 0.0) > json_rank


def sse_event(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + encoded(message) + b"\n\n"


async def sse_once(message: dict[str, Any]) -> AsyncIterator[bytes]:
    yield sse_event(message)


async def sse_streamed(work: "asyncio.Future[dict[str, Any]]") -> AsyncIterator[bytes]:
    """The answer as one SSE event, with comments while it is being worked on."""
    try:
        while True:
            done, _ = await asyncio.wait([work], timeout=KEEPALIVE_S)
            if done:
                break
            yield b": working\n\n"
        yield sse_event(work.result())
    finally:
        if not work.done():
            work.cancel()
