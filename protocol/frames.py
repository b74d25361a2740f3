"""The messages of OpenEnv's WebSocket protocol (/ws) and of MCP's JSON-RPC, as envhub sends and reads them.

Client frames: reset, step, state, close and mcp. The server answers observation, state,
mcp and error frames; an error frame carries a code (below), and CAPACITY_REACHED and
FACTORY_ERROR close the socket after it.
"""

import re
from enum import StrEnum
from typing import Any

__all__ = [
    "CLOSE",
    "STATE",
    "ErrorCode",
    "capacity",
    "capacity_frame",
    "error_code",
    "is_error_text",
    "is_step_text",
    "is_work_text",
    "mcp_frame",
    "reset_frame",
    "rpc",
    "rpc_capacity",
    "rpc_capacity_error",
    "step_frame",
]


class ErrorCode(StrEnum):
    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"


STATE: dict[str, Any] = {"type": "state"}
CLOSE: dict[str, Any] = {"type": "close"}


def reset_frame(options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Reset: the options (seed, episode_id, the environment's own) are the reset's keyword arguments."""
    return {"type": "reset", "data": options or {}}


def step_frame(action: dict[str, Any]) -> dict[str, Any]:
    """Step: the data is the action itself, not {"action": ...} as over HTTP."""
    return {"type": "step", "data": action}


def mcp_frame(request: dict[str, Any]) -> dict[str, Any]:
    return {"type": "mcp", "data": request}


def rpc(method: str, params: dict[str, Any] | None = None, request_id: int | str = 1) -> dict[str, Any]:
    """A JSON-RPC 2.0 request, as POST /mcp, WS /mcp and mcp frames take it."""
    request: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": request_id}
    if params is not None:
        request["params"] = params
    return request


def error_code(frame: Any) -> str | None:
    """The code of an error frame; None for any other frame."""
    if not isinstance(frame, dict) or frame.get("type") != "error":
        return None
    data = frame.get("data")
    code = data.get("code") if isinstance(data, dict) else None
    return code if isinstance(code, str) else None


def capacity(frame: Any) -> dict[str, Any] | None:
    """The data of a CAPACITY_REACHED frame (active_sessions, max_sessions, message); None for any other."""
    if error_code(frame) != ErrorCode.CAPACITY_REACHED:
        return None
    data: dict[str, Any] = frame["data"]
    return data


def capacity_frame(
    message: str, active_sessions: int, max_sessions: int, facts: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A CAPACITY_REACHED error frame, as a server sends it before it closes (`facts`: what envhub adds, the limit
    that refused it and the numbers behind it)."""
    data: dict[str, Any] = {"message": message, "code": ErrorCode.CAPACITY_REACHED.value}
    data |= {"active_sessions": active_sessions, "max_sessions": max_sessions} | (facts or {})
    return {"type": "error", "data": data}


RPC_SERVER_ERROR = -32000  # JSON-RPC's server error: a capacity or factory error on /mcp


def rpc_capacity(response: Any) -> dict[str, Any] | None:
    """The data (active_sessions, max_sessions) of a JSON-RPC capacity error; None for any other message."""
    if not isinstance(response, dict):
        return None
    error = response.get("error")
    if not isinstance(error, dict) or error.get("code") != RPC_SERVER_ERROR:
        return None
    data = error.get("data")
    if not isinstance(data, dict) or "max_sessions" not in data:
        return None
    return data


def rpc_capacity_error(
    request_id: Any, message: str, active_sessions: int, max_sessions: int, facts: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A JSON-RPC capacity error, as a server answers /mcp at capacity (`facts`: as capacity_frame's)."""
    data: dict[str, Any] = {"active_sessions": active_sessions, "max_sessions": max_sessions} | (facts or {})
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": RPC_SERVER_ERROR, "message": message, "data": data}}


# Recognised from a frame's first bytes without parsing it whole: clients and servers write "type" first.
_STEP = re.compile(rb'\s*\{\s*"type"\s*:\s*"step"')
_ERROR = re.compile(rb'\s*\{\s*"type"\s*:\s*"error"')
_WORK = re.compile(rb'"type"\s*:\s*"(?:reset|step|mcp)"|"method"\s*:')  # a reset, a step, an MCP call


def is_step_text(start: bytes) -> bool:
    """Whether a text frame that starts with these bytes is a step."""
    return _STEP.match(start) is not None


def is_error_text(start: bytes) -> bool:
    """Whether a text frame that starts with these bytes is an error."""
    return _ERROR.match(start) is not None


def is_work_text(start: bytes) -> bool:
    """Whether a client's text frame that starts with these bytes asks the environment for work: a reset, a step or
    an MCP call (JSON-RPC over /mcp, or a {"type": "mcp"} message), in whatever order its keys come."""
    return _WORK.search(start) is not None
