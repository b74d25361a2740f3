"""Connect snippets: valid Python for any schema, the URL in each, MCP only with tools.
(tests/ui/test_snippets_run.py runs them against live environments.)"""

import ast

import pytest

from app.ui.forms import form_fields
from app.ui.snippets import Target, all_snippets, curl, trl, websocket_messages
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
    assert "generation_batch_size=128," in held
    assert "generation_batch_size" not in trl(Target(url="http://h/endpoints/abc", fields=form_fields(MAZE)))
