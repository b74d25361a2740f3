"""Checklist items 27-31 and 33: MCP over POST /mcp, and MCP sessions attached to WS /ws."""

import asyncio
import uuid
from typing import Any

from conformance.context import Context, Fail, NotRun, Skip, excerpt, parse_frame
from conformance.engine import NEWER, Registry
from protocol import frames
from protocol.frames import ErrorCode
from protocol.tools import cheapest_tool, parse_tools, tool_arguments

checks: Registry[Context] = Registry()
session_checks: Registry[Context] = Registry()

_RESERVED = {"reset", "step", "state", "close"}


async def _rpc(
    ctx: Context, body: Any = None, *, content: str | None = None, what: str = "POST /mcp"
) -> dict[str, Any]:
    """A JSON-RPC exchange over POST /mcp, which answers 200 even for errors."""
    if content is not None:
        fetched = await ctx.request("POST", "/mcp", content=content, headers={"content-type": "application/json"})
    else:
        fetched = await ctx.post("/mcp", body)
    reply = ctx.expect(fetched, 200, what)
    if not isinstance(reply, dict) or reply.get("jsonrpc") != "2.0":
        raise Fail(f"{what} answered {excerpt(reply, 160)}, not a JSON-RPC 2.0 response")
    if ("result" in reply) == ("error" in reply):
        raise Fail(f"{what}: a JSON-RPC response has exactly one of result and error: {excerpt(reply, 160)}")
    return reply


def _error(reply: dict[str, Any], code: int, what: str, request_id: Any = None) -> dict[str, Any]:
    error = reply.get("error")
    if not isinstance(error, dict) or error.get("code") != code or not isinstance(error.get("message"), str):
        raise Fail(f"{what} answered {excerpt(reply, 160)}, not a JSON-RPC error {code} with a message")
    if reply.get("id") != request_id:
        raise Fail(f"{what}: the error's id is {excerpt(reply.get('id'), 40)}, not {request_id!r}")
    return error


@checks("27", "POST /mcp {} gets JSON-RPC error -32600 (invalid request)")
async def invalid_request(ctx: Context) -> str:
    error = _error(await _rpc(ctx, {}, what="POST /mcp {}"), -32600, "POST /mcp {}")
    return f"-32600 {excerpt(error['message'], 60)}"


@checks("28", "POST /mcp with a body that is not JSON gets -32700 (parse error)")
async def parse_error(ctx: Context) -> str:
    error = _error(await _rpc(ctx, content="not json", what="POST /mcp 'not json'"), -32700, "POST /mcp 'not json'")
    return f"-32700 {error['message']}"


@checks("29", "POST /mcp with an unknown method gets -32601 with the request's id")
async def unknown_method(ctx: Context) -> str:
    request = {"jsonrpc": "2.0", "method": "no/such", "id": 7}
    error = _error(await _rpc(ctx, request), -32601, "method no/such", request_id=7)
    return f"-32601 {error['message']}"


@checks("30", "tools/list lists well-formed tools, or says the environment has no MCP")
async def tools_list(ctx: Context) -> str:
    reply = await _rpc(ctx, {"jsonrpc": "2.0", "method": "tools/list", "id": 1}, what="tools/list")
    if "error" in reply:
        error = _error(reply, -32603, "tools/list", request_id=1)
        ctx.facts.tools = []
        return f"no MCP: {excerpt(error['message'], 80)}"
    tools = reply["result"].get("tools") if isinstance(reply["result"], dict) else None
    if not isinstance(tools, list):
        raise Fail("tools/list's result has no tools list")
    for tool in tools:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise Fail(f"a tool without a string name: {excerpt(tool, 120)}")
        if not isinstance(tool.get("description"), str | None):
            raise Fail(f"tool {tool['name']}'s description is not a string")
        schema = tool.get("inputSchema", tool.get("input_schema"))
        if not isinstance(schema, dict):
            raise Fail(f"tool {tool['name']} has no input schema object")
    reserved = sorted({t["name"] for t in tools} & _RESERVED)
    if reserved:
        raise Fail(f"tools may not be named {', '.join(reserved)}: those are the simulation controls")
    ctx.facts.tools = parse_tools(tools)
    return f"{len(tools)} tools: {excerpt(', '.join(t['name'] for t in tools), 120)}"


@checks("31", "tools/call calls a tool; a call without a name gets -32602")
async def tools_call(ctx: Context) -> str:
    message = "no MCP tools to call"
    if ctx.facts.tools:
        tool = cheapest_tool(ctx.facts.tools)
        params = {"name": tool.name, "arguments": tool_arguments(tool)}
        reply = await _rpc(
            ctx, {"jsonrpc": "2.0", "method": "tools/call", "params": params, "id": 3}, what="tools/call"
        )
        if "error" in reply:
            raise Fail(f"calling {tool.name} with {excerpt(params['arguments'], 80)} failed: {excerpt(reply, 160)}")
        message = f"{tool.name} answered"
    elif ctx.facts.tools is None:
        raise NotRun("not run: tools/list did not answer (check 30)")
    missing = await _rpc(ctx, {"jsonrpc": "2.0", "method": "tools/call", "params": {}, "id": 4}, what="tools/call {}")
    if ctx.facts.tools:
        _error(missing, -32602, "tools/call without a name", request_id=4)
    elif "error" not in missing:
        raise Fail("tools/call without a name answered a result")
    return f"{message}; a call without a name is refused"


@session_checks("33", "MCP sessions: create, attach WS /ws?session_id=, refuse a second attach, close", since=NEWER)
async def mcp_sessions(ctx: Context) -> str:
    create = {"jsonrpc": "2.0", "method": "openenv/session/create", "params": {}, "id": 5}
    for _ in range(20):
        reply = await _rpc(ctx, create, what="openenv/session/create")
        error = reply.get("error")
        if not (isinstance(error, dict) and error.get("code") == -32000):
            break
        await asyncio.sleep(0.1)  # the checker's own sessions may still be closing
    if isinstance(reply.get("error"), dict) and reply["error"].get("code") == -32601:
        raise Skip("no openenv/session/create: an older server (before openenv 0.10)")
    result = reply.get("result")
    session_id = result.get("session_id") if isinstance(result, dict) else None
    try:
        uuid.UUID(str(session_id))
    except ValueError as exc:
        raise Fail(f"session/create answered {excerpt(reply, 160)}, without a UUID session_id") from exc

    async def close_session() -> None:
        params = {"session_id": session_id}
        await _rpc(ctx, {"jsonrpc": "2.0", "method": "openenv/session/close", "params": params, "id": 9})

    ctx.cleanups.append(close_session)
    attached = await ctx.websocket(f"/ws?session_id={session_id}", "S")
    state = await attached.exchange(frames.STATE, "a state frame")
    if state.get("type") != "state":
        raise Fail(f"state on the attached session got {excerpt(state, 160)}")
    second = await ctx.websocket(f"/ws?session_id={session_id}", "S2")
    # The server refuses the second attach at once, or at the first message: either is fine.
    early = await second.unsolicited()
    refused = parse_frame(early) if early is not None else await second.exchange(frames.STATE, "an error frame")
    data = refused.get("data")
    if refused.get("type") != "error" or not isinstance(data, dict) or data.get("code") != ErrorCode.SESSION_ERROR:
        raise Fail(f"a second attach to the same session got {excerpt(refused, 160)}, not SESSION_ERROR")
    await second.close()
    params = {"session_id": session_id}
    closing = await _rpc(ctx, {"jsonrpc": "2.0", "method": "openenv/session/close", "params": params, "id": 6})
    if closing.get("result") != {"session_id": session_id, "closed": False, "closing": True}:
        raise Fail(f"closing a session with an attached socket answered {excerpt(closing, 160)}")
    ctx.cleanups.remove(close_session)  # it closes when the socket detaches
    await attached.close()
    unknown = {"session_id": str(uuid.uuid4())}
    reply = await _rpc(ctx, {"jsonrpc": "2.0", "method": "openenv/session/close", "params": unknown, "id": 8})
    _error(reply, -32602, "closing an unknown session", request_id=8)
    return "created, attached, second attach refused, closed on detach, unknown id refused"
