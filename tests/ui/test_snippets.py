"""Connect snippets: valid Python for any schema, the URL in each, MCP only with tools; agent harnesses'
configurations for every envhub endpoint, parsing as each harness reads them, with a header only when private.
(tests/ui/test_snippets_run.py runs them against live environments.)"""

import ast
import json
import shlex
import tomllib

import pytest

from app.ui.forms import form_fields
from app.ui.snippets import RECORDED, Target, agents, all_snippets, curl, trl, websocket_messages
from protocol.tools import parse_tools
from tests.ui.schemas import ARITHMETIC, CALL_TOOL, CONNECT_FOUR, CONVERT_UNITS_TOOL, MAZE, NESTED

URL = "https://envhub.example/endpoints/abc123"


@pytest.mark.parametrize("schema", [MAZE, CONNECT_FOUR, ARITHMETIC, NESTED, CALL_TOOL, {}])
def test_python_snippets_parse_for_any_schema(schema: dict[str, object]) -> None:
    snippets = all_snippets(Target(URL, 'It\'s "quoted"', form_fields(schema)))
    assert set(snippets) == {"Python", "Python (async)", "TRL", "curl", "WebSocket"}
    for name, text in snippets.items():
        assert (URL if name != "WebSocket" else "wss://envhub.example/endpoints/abc123/ws") in text, name
        if name != "curl":
            ast.parse(text)


def test_mcp_environments_get_tool_methods_and_an_mcp_client() -> None:
    tools = parse_tools([CONVERT_UNITS_TOOL, {"name": "get_question", "input_schema": {"properties": {}}}])
    target = Target(URL, "Toolbox", form_fields(CALL_TOOL), tools)
    snippets = all_snippets(target)
    assert "MCP" in snippets
    ast.parse(snippets["MCP"])
    assert "await env.call_tool('convert_units', value=0.0, from_unit='hello', to_unit='hello')" in snippets["MCP"]
    code = trl(target)
    ast.parse(code)
    assert "def convert_units(self, value: float, from_unit: str, to_unit: str) -> str:" in code
    assert "def get_question(self) -> str:" in code
    assert "tools/list" in curl(target)
    assert websocket_messages(target)[1] == {
        "type": "step",
        "data": {
            "type": "call_tool",
            "tool_name": "convert_units",
            "arguments": {"value": 0.0, "from_unit": "hello", "to_unit": "hello"},
        },
    }


def test_trl_tool_for_a_plain_action() -> None:
    code = trl(Target(URL, "Maze", form_fields(MAZE)))
    assert "def act(self, direction: str) -> str:" in code
    assert "direction: Where to move one square" in code
    optional = trl(Target(URL, "Arithmetic", form_fields(ARITHMETIC)))
    assert "def act(self, answer: str, reasoning: str | None = None) -> str:" in optional


def test_task_environments_list_their_splits() -> None:
    target = Target(URL, "Arithmetic", form_fields(ARITHMETIC), task_env="arithmetic_tasks", splits=("train", "test"))
    assert websocket_messages(target)[0] == {"type": "reset", "data": {"seed": 0}}  # reset options vary by env
    assert "env.reset(seed=0)" in all_snippets(target)["Python"]
    assert f"curl -s {URL}/arithmetic_tasks/splits" in curl(target)


def test_websocket_url() -> None:
    assert Target("https://a.hf.space").ws_url == "wss://a.hf.space/ws"
    assert Target("http://127.0.0.1:7860/endpoints/x/").ws_url == "ws://127.0.0.1:7860/endpoints/x/ws"


def test_trl_asks_for_a_generation_batch_the_pool_holds() -> None:
    held = trl(Target(url="http://h/endpoints/abc", fields=form_fields(MAZE), sessions=128))
    ast.parse(held)
    assert "generation_batch_size=128," in held and "num_generations=8," in held
    unknown = trl(Target(url="http://h/endpoints/abc", fields=form_fields(MAZE)))
    assert "generation_batch_size=8," in unknown  # TRL's own default batch: the server must hold as many


HARNESSES = {"Claude Code", "Codex", "Cursor", "Claude Desktop", "MCP Inspector"}


def test_every_endpoint_gets_agent_configurations() -> None:
    snippets = all_snippets(Target(URL, "Connect Four", form_fields(CONNECT_FOUR), door=True))
    assert set(snippets) == {"Python", "Python (async)", "TRL", "curl", "WebSocket"} | HARNESSES | set(RECORDED)
    mcp_url = f"{URL}/mcp"
    assert snippets["Claude Code"] == f"claude mcp add --transport http connect-four {mcp_url}\n"
    assert snippets["Codex"] == f'[mcp_servers.connect-four]\nurl = "{mcp_url}"\n'
    assert json.loads(snippets["Cursor"]) == {"mcpServers": {"connect-four": {"url": mcp_url}}}
    assert json.loads(snippets["Claude Desktop"]) == {
        "mcpServers": {"connect-four": {"command": "npx", "args": ["-y", "mcp-remote", mcp_url]}}
    }
    assert snippets["MCP Inspector"] == (
        f"npx @modelcontextprotocol/inspector --cli {mcp_url} --transport http --method tools/list\n"
    )
    assert not any("TOKEN" in snippets[name] or "header" in snippets[name].lower() for name in HARNESSES)


def test_a_private_endpoint_shows_where_its_token_goes() -> None:
    configs = agents(Target("http://10.0.0.5:7860/endpoints/abc", 'It\'s "quoted"', door=True, private=True))
    mcp_url = "http://10.0.0.5:7860/endpoints/abc/mcp"
    claude = shlex.split(configs["Claude Code"])
    assert claude == [
        "claude", "mcp", "add", "--transport", "http", "--header", "Authorization: Bearer TOKEN", "it-s-quoted", mcp_url
    ]  # fmt: skip
    codex = tomllib.loads(configs["Codex"])["mcp_servers"]["it-s-quoted"]
    assert codex == {"url": mcp_url, "bearer_token_env_var": "ENVHUB_ENDPOINT_TOKEN"}
    assert "export ENVHUB_ENDPOINT_TOKEN=TOKEN" in configs["Codex"]
    cursor = json.loads(configs["Cursor"])["mcpServers"]["it-s-quoted"]
    assert cursor == {"url": mcp_url, "headers": {"Authorization": "Bearer TOKEN"}}
    desktop = json.loads(configs["Claude Desktop"])["mcpServers"]["it-s-quoted"]
    assert desktop == {
        "command": "npx",
        "args": ["-y", "mcp-remote", mcp_url, "--allow-http", "--header", "Authorization:${AUTH_HEADER}"],
        "env": {"AUTH_HEADER": "Bearer TOKEN"},
    }
    inspector = shlex.split(configs["MCP Inspector"])
    assert inspector[:4] == ["npx", "@modelcontextprotocol/inspector", "--cli", mcp_url]
    assert inspector[inspector.index("--header") + 1] == "Authorization: Bearer TOKEN"
    assert inspector[inspector.index("--method") + 1] == "tools/list"


def test_a_space_host_gets_no_agent_configurations() -> None:
    """A Space's own /mcp is openenv's JSON-RPC (tools/list, tools/call), not an MCP server a harness can use."""
    tools = parse_tools([CONVERT_UNITS_TOOL])
    snippets = all_snippets(Target("https://alice-toolbox.hf.space", "Toolbox", form_fields(CALL_TOOL), tools))
    assert "MCP" in snippets and not HARNESSES & set(snippets)


def test_server_names_are_short_slugs() -> None:
    assert Target(URL, "Wordle").server_name == "wordle"
    assert Target(URL, "  Chess: 8x8 (FEN) ").server_name == "chess-8x8-fen"
    assert Target(URL, "A" * 40 + " B").server_name == "a" * 32
    assert Target(URL, "♟").server_name == "envhub"
