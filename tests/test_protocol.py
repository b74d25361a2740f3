"""The OpenEnv vocabulary's parsers, on the shapes real servers send: capacity refusals, steps and errors told from
a frame's first bytes, schema references, tool lists, legal actions, refusals and images in observations."""

import base64
import json
from typing import Any

from protocol.frames import capacity, capacity_frame, is_error_text, is_step_text, rpc_capacity, rpc_capacity_error
from protocol.observations import image_data_uri, legal_actions, refusal
from protocol.schemas import inline_refs, resolve
from protocol.tools import Tool, example_action, parse_tools, takes_tool_calls

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40).decode()


def test_capacity_refusals_are_told_from_every_other_message() -> None:
    frame = capacity_frame("full", 1, 1)
    assert capacity(frame) == frame["data"] == capacity(json.loads(json.dumps(frame)))
    assert capacity({"type": "error", "data": {"code": "EXECUTION_ERROR", "message": "boom"}}) is None
    assert capacity({"type": "observation", "data": {}}) is None and capacity("CAPACITY_REACHED") is None
    error = rpc_capacity_error(7, "full", 2, 2)
    assert rpc_capacity(error) == {"active_sessions": 2, "max_sessions": 2} and error["id"] == 7
    assert rpc_capacity({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "factory failed"}}) is None
    assert rpc_capacity({"jsonrpc": "2.0", "id": 1, "result": {"max_sessions": 3}}) is None


def test_steps_and_errors_are_told_from_a_frames_first_bytes() -> None:
    assert is_step_text(b'{"type": "step", "data": {"guess": "crane"}}')
    assert is_step_text(b' {\n "type":"step"')  # however it is spaced, cut anywhere after "step"
    assert not is_step_text(b'{"type": "reset", "data": {"step": 1}}')
    assert not is_step_text(b'{"data": {}, "type": "step"}')  # "type" not first: not recognised, by design
    assert is_error_text(b'{"type":"error","data":{"code":"VALIDATION_ERROR"}}')
    assert not is_error_text(b'{"type": "observation", "data": {"error": "no"}}')


def test_local_references_are_followed_and_inlined_but_a_recursive_one_stays() -> None:
    schema: dict[str, Any] = {
        "$defs": {
            "Direction": {"type": "string", "enum": ["up", "down"]},
            "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}},
        },
        "type": "object",
        "properties": {"direction": {"$ref": "#/$defs/Direction", "description": "where to go"}},
    }
    assert resolve(schema["properties"]["direction"], schema) == {
        "type": "string",
        "enum": ["up", "down"],
        "description": "where to go",
    }
    inlined = inline_refs(schema)
    assert inlined["properties"]["direction"]["enum"] == ["up", "down"] and "$defs" not in inlined
    recursive = {**schema, "properties": {**schema["properties"], "tree": {"$ref": "#/$defs/Node"}}}
    kept = inline_refs(recursive)
    assert kept["properties"]["tree"]["properties"]["next"] == {"$ref": "#/$defs/Node"} and "$defs" in kept
    assert resolve({"$ref": "https://elsewhere.example/schema.json"}, schema) == {}  # only local ones


def test_tool_lists_of_every_shape_and_the_action_that_calls_one() -> None:
    listed = {"tools": [{"name": "add", "description": "adds", "inputSchema": {"type": "object"}}, {"no": "name"}]}
    bare = [{"name": "add", "input_schema": {"type": "object", "required": ["a"]}}]
    assert [t.name for t in parse_tools(listed)] == ["add"] and parse_tools(bare)[0].input_schema == bare[0][
        "input_schema"
    ]
    assert parse_tools("garbage") == [] and parse_tools({"tools": "nope"}) == []
    call_tool = {"type": "object", "properties": {"tool_name": {"type": "string"}, "arguments": {"type": "object"}}}
    assert takes_tool_calls(call_tool) and takes_tool_calls({"type": "object", "properties": {"metadata": {}}})
    assert not takes_tool_calls({"type": "object", "properties": {"guess": {"type": "string"}}})
    tools = [Tool("hard", "", {"type": "object", "required": ["a", "b"]}), Tool("easy", "", {"type": "object"})]
    assert example_action(call_tool, tools) == {"type": "call_tool", "tool_name": "easy", "arguments": {}}
    guess = {"type": "object", "properties": {"guess": {"type": "string"}}, "required": ["guess"]}
    action = example_action(guess, None)
    assert action is not None and isinstance(action["guess"], str)
    assert example_action(None, None) is None


def test_observations_say_their_legal_actions_their_refusals_and_their_images() -> None:
    assert legal_actions({"legal_actions": ["e2e4", "d2d4"]}) == ["e2e4", "d2d4"]
    assert legal_actions({"legal_actions": "e2e4"}) == [] and legal_actions(None) == []
    assert refusal({"error": "not a word"}) == "not a word"
    assert refusal({"error": {"error_type": "ValueError", "message": "column full"}}) == "ValueError: column full"
    assert refusal({"error": ""}) is None and refusal({"board": []}) is None
    assert image_data_uri(PNG) == f"data:image/png;base64,{PNG}"
    assert image_data_uri(f"data:image/PNG;base64,{PNG}") == f"data:image/png;base64,{PNG}"
    assert image_data_uri("just some text that is long enough to look like base64") is None
    assert image_data_uri(base64.b64encode(b"not an image at all, but long enough").decode()) is None
