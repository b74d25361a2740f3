"""Checklist items 13-26 and 32: the WebSocket protocol on /ws, with at most one short episode.

Socket A carries the episode; B tests isolation (or meets the capacity limit when the
server allows one session); C, opened after A closes, ends with a binary frame. No more
than two sessions are held at once, and a server that allows one never gets a second.
"""

import asyncio
import math
import uuid
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from conformance.context import QUIET_S, Context, Fail, NotRun, Skip, Socket, excerpt, is_int, parse_frame
from conformance.engine import Registry, Severity
from protocol import frames
from protocol.frames import ErrorCode, error_code
from protocol.tools import example_action

checks: Registry[Context] = Registry()


def _capacity(ctx: Context, frame: str | bytes) -> dict[str, Any] | None:
    """The data of a CAPACITY_REACHED frame, remembered; None for any other frame."""
    try:
        data = frames.capacity(parse_frame(frame))
    except Fail:
        return None
    if data is None:
        return None
    ctx.facts.capacity_frame = data
    if is_int(data.get("max_sessions")):
        ctx.facts.max_sessions = data["max_sessions"]
    return data


def _expect_observation(frame: dict[str, Any], what: str) -> dict[str, Any]:
    if frame.get("type") != "observation":
        raise Fail(f"{what} got a {excerpt(frame.get('type'), 40)} frame, not observation: {excerpt(frame, 160)}")
    data = frame.get("data")
    if not isinstance(data, dict):
        raise Fail(f"{what}: the observation frame has no data object")
    if not isinstance(data.get("observation"), dict):
        raise Fail(f"{what}: data.observation is not an object")
    if not isinstance(data.get("done"), bool):
        raise Fail(f"{what}: data.done is {excerpt(data.get('done'), 40)}, not a boolean")
    if "reward" not in data:
        raise Fail(f"{what}: data has no reward (it may be null, but must be there)")
    reward = data["reward"]
    if reward is not None and not isinstance(reward, int | float):
        raise Fail(f"{what}: data.reward is {excerpt(reward, 40)}, not a number, boolean or null")
    return data


def _expect_state(frame: dict[str, Any], what: str = "state") -> dict[str, Any]:
    data = frame.get("data")
    if frame.get("type") != "state" or not isinstance(data, dict):
        raise Fail(f"{what} got {excerpt(frame, 160)}, not a state frame")
    if not is_int(data.get("step_count")):
        raise Fail(f"{what}: step_count is {excerpt(data.get('step_count'), 40)}, not an integer")
    return data


async def _state(socket: Socket, what: str = "state") -> dict[str, Any]:
    return _expect_state(await socket.exchange(frames.STATE, "a state frame"), what)


def _expect_error(frame: dict[str, Any], code: str, what: str) -> dict[str, Any]:
    found = error_code(frame)
    if found != code:
        raise Fail(f"{what} got {excerpt(frame, 160)}, not an error with code {code}")
    data: dict[str, Any] = frame["data"]
    if not isinstance(data.get("message"), str):
        raise Fail(f"{what}: the {code} error has no message")
    return data


@checks("13", "WS /ws opens, and the server waits for the client to speak")
async def open_ws(ctx: Context) -> str:
    socket = await ctx.websocket("/ws", "A")
    frame = await socket.unsolicited()
    if frame is None:
        ctx.facts.sessions_open = 1
        return "open and quiet"
    data = _capacity(ctx, frame)
    socket.broken = "the server was at capacity when the check began"
    if data is not None:
        raise NotRun(
            f"the server is at capacity ({excerpt(data.get('message'), 120)}): its sessions are all in use; try later"
        )
    raise Fail(f"the server sent a frame before the client spoke: {excerpt(frame, 160)}")


@checks("14", 'WS {"type": "reset"} gets one observation frame')
async def ws_reset(ctx: Context) -> str:
    data = _expect_observation(await ctx.socket().exchange(frames.reset_frame(), "an observation"), "reset")
    return f"observation with done={data['done']}, reward={data['reward']}"


@checks("15", 'WS {"type": "state"} gets a state frame with step_count')
async def ws_state(ctx: Context) -> str:
    data = await _state(ctx.socket())
    return f"step_count {data['step_count']}"


@checks("18", "WS text that is not JSON gets INVALID_JSON, and the socket stays usable")
async def ws_invalid_json(ctx: Context) -> str:
    socket = ctx.socket()
    data = _expect_error(await socket.exchange("not json", "an error frame"), ErrorCode.INVALID_JSON, "'not json'")
    await _state(socket, "state after INVALID_JSON")
    return f"INVALID_JSON ({excerpt(data['message'], 60)}), then state answered"


@checks("19", 'WS {"type": "bogus"} gets UNKNOWN_TYPE')
async def ws_unknown_type(ctx: Context) -> str:
    data = _expect_error(
        await ctx.socket().exchange({"type": "bogus"}, "an error frame"), ErrorCode.UNKNOWN_TYPE, "bogus"
    )
    if "bogus" not in data["message"]:
        raise Fail(f"the message {excerpt(data['message'], 80)!r} does not name the type 'bogus'")
    return str(data["message"])


@checks("20", "WS steps without data, or with an invalid action, get VALIDATION_ERROR; the socket stays open")
async def ws_validation(ctx: Context) -> str:
    socket = ctx.socket()
    for frame, what in (
        ({"type": "step"}, "a step without data"),
        ({"type": "step", "data": {"__nope__": 1}}, "a step with an unknown action field"),
    ):
        data = _expect_error(await socket.exchange(frame, "an error frame"), ErrorCode.VALIDATION_ERROR, what)
        if not isinstance(data.get("errors"), list):
            raise Fail(f"{what}: the VALIDATION_ERROR has no errors list")
    await _state(socket, "state after VALIDATION_ERROR")
    return "VALIDATION_ERROR twice, then state answered"


def build_action(ctx: Context) -> dict[str, Any]:
    """A valid action: an MCP tool call when the server takes them, else the smallest instance of /schema's action."""
    if ctx.facts.action is not None:
        return ctx.facts.action
    schema = ctx.facts.schema.get("action") if ctx.facts.schema else None
    action = example_action(schema, ctx.facts.tools)
    if action is None:
        if isinstance(schema, dict):
            raise NotRun("not run: the action schema does not describe an object")
        raise NotRun("not run: no action schema (check 3) and no MCP tools (check 30) to build an action from")
    ctx.facts.action = action
    return action


@checks("17", "WS step with a valid action gets an observation frame")
async def ws_step(ctx: Context) -> str:
    # The episode: reset with an id and a seed, read the state, take one step, read the state.
    socket = ctx.socket()
    action = build_action(ctx)
    episode = ctx.facts.episode
    episode["id"] = f"envhub-check-{uuid.uuid4().hex[:12]}"
    episode["reset"] = await socket.exchange(
        frames.reset_frame({"episode_id": episode["id"], "seed": 42}), "an observation"
    )
    episode["before"] = await socket.exchange(frames.STATE, "a state frame")
    step = await socket.exchange(frames.step_frame(action), "an observation")
    episode["step"] = step
    if error_code(step) == ErrorCode.EXECUTION_ERROR:
        ctx.facts.execution_error = step["data"]
    episode["after"] = await socket.exchange(frames.STATE, "a state frame")
    if error_code(step):
        # The action is valid for the server's own schema (or tools): an error is the environment's, not the URL's.
        raise Fail(
            f"the environment's server failed on {excerpt(action, 160)}, an action its schema allows: it answered "
            f"{error_code(step)}: {excerpt(step.get('data', {}).get('message'), 200)}"
        )
    data = _expect_observation(step, "step")
    return f"action {excerpt(action, 100)} → done={data['done']}, reward={data['reward']}"


def _episode(ctx: Context, *keys: str) -> list[dict[str, Any]]:
    episode = ctx.facts.episode
    missing = [k for k in keys if k not in episode]
    if missing:
        raise NotRun("not run: the episode of check 17 did not get that far")
    return [episode[k] for k in keys]


@checks("16", "Reset with episode_id and seed is echoed by state; step_count counts steps", Severity.WARN)
async def episode_id(ctx: Context) -> str:
    before, after, step = _episode(ctx, "before", "after", "step")
    start, end = _expect_state(before, "state after reset"), _expect_state(after, "state after one step")
    wanted = ctx.facts.episode["id"]
    if start.get("episode_id") != wanted:
        raise Fail(f"state.episode_id is {excerpt(start.get('episode_id'), 60)}, not the {wanted!r} sent to reset")
    if start["step_count"] != 0:
        raise Fail(f"step_count is {start['step_count']} right after reset, not 0")
    if error_code(step) is None and end["step_count"] != 1:
        raise Fail(f"step_count is {end['step_count']} after one step, not 1")
    return "episode_id echoed; step_count 0 then 1"


@checks("26", "Step rewards are finite numbers and observations validate against /schema", Severity.WARN)
async def step_values(ctx: Context) -> str:
    (step,) = _episode(ctx, "step")
    if ctx.facts.schema is None:
        raise NotRun("not run: there is no /schema to validate against (check 3)")
    if error_code(step):
        raise NotRun("not run: the step of check 17 got an error, not an observation")
    data = _expect_observation(step, "step")
    reward = data["reward"]
    if isinstance(reward, bool) or (reward is not None and not math.isfinite(reward)):
        raise Fail(f"the reward {reward!r} is not a finite number")
    schema = ctx.facts.schema.get("observation")
    if not isinstance(schema, dict) or not _valid_schema(schema):
        raise NotRun("not run: /schema.observation is not a valid JSON Schema (check 3)")
    instance = {**data["observation"], "reward": reward, "done": data["done"]}
    errors = sorted(Draft202012Validator(schema).iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "the top level"
        raise Fail(f"the observation does not match /schema.observation at {where}: {excerpt(errors[0].message, 160)}")
    return f"reward {reward!r}; the observation matches its schema"


def _valid_schema(schema: dict[str, Any]) -> bool:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return False
    return True


@checks("21", "An environment error during step is EXECUTION_ERROR, and the session continues")
async def execution_error(ctx: Context) -> str:
    data = ctx.facts.execution_error
    if data is None:
        raise Skip("the environment raised no error during the checks, so there was nothing to observe")
    if not isinstance(data.get("message"), str):
        raise Fail("the EXECUTION_ERROR frame has no message")
    (after,) = _episode(ctx, "after")
    _expect_state(after, "state after EXECUTION_ERROR")
    return f"EXECUTION_ERROR ({excerpt(data['message'], 80)}), then state answered"


@checks("32", 'WS {"type": "mcp"} carries JSON-RPC: tools/list gets a response with the same id')
async def ws_mcp(ctx: Context) -> str:
    request = {"jsonrpc": "2.0", "method": "tools/list", "id": 1}
    frame = await ctx.socket().exchange(frames.mcp_frame(request), "an mcp frame")
    data = frame.get("data")
    if frame.get("type") != "mcp" or not isinstance(data, dict):
        raise Fail(f"got {excerpt(frame, 160)}, not an mcp frame")
    if data.get("jsonrpc") != "2.0" or data.get("id") != 1 or ("result" in data) == ("error" in data):
        raise Fail(f"the JSON-RPC response is malformed: {excerpt(data, 160)}")
    return "tools/list " + ("answered a result" if "result" in data else f"answered error {data['error'].get('code')}")


@checks("23", "Two sessions are isolated: each keeps its own episode and step_count")
async def isolation(ctx: Context) -> str:
    one_at_a_time = "each of the endpoint's servers holds one session at a time, so no second one runs beside it"
    if ctx.one_at_a_time():
        # envhub's pool would queue a second session until the first ends, not refuse it.
        raise Skip(one_at_a_time)
    a = ctx.socket("A")
    b = await ctx.websocket("/ws", "B")
    frame = await b.unsolicited()
    if frame is not None:
        data = _capacity(ctx, frame)
        if data is None:
            b.broken = "B got an unexpected frame"
            raise Fail(f"a second session got {excerpt(frame, 160)} before it spoke")
        try:
            ctx.facts.capacity_close_code, _ = await b.closed(timeout_s=2)
        except Fail:
            ctx.facts.capacity_close_code = None
        b.broken = "B was refused for capacity"
        if ctx.facts.max_sessions == 1:
            raise Skip("the server allows one session at a time, so there is no second one to compare")
        raise NotRun(f"a second session was refused: {excerpt(data.get('message'), 120)}")
    before = await _state(a, "A's state")
    reset = frames.reset_frame({"episode_id": f"envhub-check-{uuid.uuid4().hex[:12]}"})
    # A fresh pool learns what its server holds from the first session the server refuses: this one, maybe.
    replied = await ctx.reply_unless_queued(b, reset, "an observation")
    if replied is None:
        raise Skip(one_at_a_time)
    ctx.facts.sessions_open = 2
    _expect_observation(replied, "reset on B")
    after, other = await _state(a, "A's state after B's reset"), await _state(b, "B's state")
    if (after.get("episode_id"), after["step_count"]) != (before.get("episode_id"), before["step_count"]):
        raise Fail("resetting session B changed session A's state")
    if other.get("episode_id") == after.get("episode_id"):
        raise Fail(f"both sessions report the episode {excerpt(other.get('episode_id'), 60)}")
    await b.send(frames.CLOSE)
    await b.closed()
    ctx.facts.sessions_open = 1
    return "B's reset left A's episode and step_count alone"


@checks("24", 'WS {"type": "close"} closes with code 1000 and no reply')
async def ws_close(ctx: Context) -> str:
    socket = ctx.socket("A")
    await socket.send(frames.CLOSE)
    code, replies = await socket.closed()
    socket.broken = "A was closed by check 24"
    ctx.facts.sessions_open = 0
    ctx.note('WS A ← {"type": "close"}', f"closed with {code}" + (f" after {excerpt(replies, 120)}" if replies else ""))
    if replies:
        raise Fail(f"the server replied to close with {excerpt(replies[0], 160)}")
    if code != 1000:
        raise Fail(f"the server closed with code {code}, not 1000")
    return "closed with 1000"


async def _open_when_free(ctx: Context, path: str, name: str) -> Socket:
    """A new session once the server has let go of a closed one (it tears sessions down asynchronously)."""
    for _ in range(20):
        socket = await ctx.websocket(path, name)
        frame = await socket.unsolicited(QUIET_S if path == "/ws" else 0)
        if frame is None:
            return socket
        if _capacity(ctx, frame) is None:
            raise Fail(f"a new session got {excerpt(frame, 160)} before it spoke")
        await socket.close()
        await asyncio.sleep(0.1)
    raise Fail("the server stayed at capacity after the checker's sessions closed")


@checks("22", "Over capacity, a connection gets CAPACITY_REACHED and a close; after one closes, a new one opens")
async def capacity(ctx: Context) -> str:
    data = ctx.facts.capacity_frame
    if data is None and (ctx.facts.queued or ctx.one_at_a_time()):  # the pool may have grown since it queued one
        raise Skip(
            "each of the endpoint's servers holds one session, and its pool queues a session past them (for up to "
            "ENVHUB_POOL_QUEUE_S) before it refuses it: the checker does not wait that out"
        )
    if data is None:
        if ctx.facts.sessions_open == 0 and "B" in ctx.sockets and not ctx.sockets["B"].broken:
            raise Skip("the server took two sessions; the checker does not open more to find its limit")
        raise NotRun("not run: the second session of check 23 was not opened")
    active, limit = data.get("active_sessions"), data.get("max_sessions")
    if not (is_int(active) and is_int(limit)):
        raise Fail(f"the CAPACITY_REACHED frame lacks active_sessions and max_sessions: {excerpt(data, 160)}")
    code = ctx.facts.capacity_close_code
    if code != 1000:
        raise Fail(f"the refused connection was closed with {code}, not 1000")
    socket = await _open_when_free(ctx, "/ws", "C")
    await _state(socket, "state on the new session")
    return f"refused at {active}/{limit} with code 1000; a new session opened after one closed"


@checks("25", "A binary frame gets SESSION_ERROR and a close")
async def binary_frame(ctx: Context) -> str:
    socket = ctx.sockets.get("C")
    if socket is None or socket.broken:
        socket = await _open_when_free(ctx, "/ws", "C")
    await socket.send(b"\x00\x01binary")
    frame = parse_frame(await socket.receive("an error frame"))
    ctx.note("WS C ← (binary frame)", excerpt(frame))
    _expect_error(frame, ErrorCode.SESSION_ERROR, "a binary frame")
    code, _ = await socket.closed()
    socket.broken = "C was closed by check 25"
    if code != 1000:
        raise Fail(f"after SESSION_ERROR the server closed with {code}, not 1000")
    return "SESSION_ERROR, then closed"


@checks("32b", "WS /mcp answers JSON-RPC tools/list with the same id")
async def mcp_socket(ctx: Context) -> str:
    socket = await ctx.websocket("/mcp", "M")
    for _ in range(20):
        reply = await socket.exchange({"jsonrpc": "2.0", "method": "tools/list", "id": 2}, "a JSON-RPC response")
        error = reply.get("error")
        if isinstance(error, dict) and error.get("code") == -32000 and "capacity" in str(error.get("message")).lower():
            # Sessions this check closed moments ago may not be torn down yet.
            await socket.close()
            await asyncio.sleep(0.1)
            socket = await ctx.websocket("/mcp", "M")
            continue
        break
    if reply.get("jsonrpc") != "2.0" or reply.get("id") != 2 or ("result" in reply) == ("error" in reply):
        raise Fail(f"the JSON-RPC response is malformed: {excerpt(reply, 160)}")
    await socket.close()
    return "tools/list " + (
        "answered a result" if "result" in reply else f"answered error {reply['error'].get('code')}"
    )


ORDER = ("13", "14", "15", "18", "19", "20", "17", "16", "26", "21", "32", "23", "24", "22", "25", "32b")
checks.sort(key=lambda c: ORDER.index(c.check_id))
