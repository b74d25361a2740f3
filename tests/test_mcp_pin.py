"""The `mcp` SDK envhub is written against: the installed one is the one requirements.txt pins, and it has the
client surface rollout/door.py uses, as it uses it (2.x changed each of these; gateway/mcp/ fails at import)."""

import inspect
import typing
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, InitializeResult

REQUIREMENTS = Path(__file__).parents[1] / "requirements.txt"


def test_the_installed_mcp_is_the_pinned_one_with_the_client_envhub_uses() -> None:
    pins = {name: pin for name, _, pin in (line.partition("==") for line in REQUIREMENTS.read_text().split())}
    assert version("mcp") == pins.get("mcp")
    # streamable_http_client(url, http_client=...) gives three things (read, write, the session id): 2.x gives two
    inspect.signature(streamable_http_client).bind("http://127.0.0.1/mcp", http_client=None)
    streams = typing.get_args(typing.get_type_hints(streamable_http_client)["return"])[0]
    assert len(typing.get_args(streams)) == 3
    # ClientSession(read, write, read_timeout_seconds=timedelta, client_info=...): 2.x takes float seconds
    session = typing.get_type_hints(ClientSession.__init__)
    assert timedelta in typing.get_args(session["read_timeout_seconds"]) and "client_info" in session
    # the camelCase fields the door reads of a result and of initialize's answer: 2.x names them snake_case
    assert {"structuredContent", "isError"} <= set(CallToolResult.model_fields)
    assert {"protocolVersion", "meta"} <= set(InitializeResult.model_fields)
