"""The Connect panel: its Agents (MCP) tab shows for envhub's endpoints (and the placeholder before one runs),
not for a Space's own host; the header lines only for a private endpoint."""

import gradio as gr

from app.ui import connect
from envclient.interface import Interface
from hosting.models import PoolPublic
from protocol.tools import parse_tools
from tests.ui.schemas import CONVERT_UNITS_TOOL

BASE = "https://envhub.example"
URL = f"{BASE}/endpoints/abc123"
POOL = PoolPublic(
    min=1, max=1, sessions=0, capacity=1, capacity_at_max=1, generation_batch_size=1, waiting=0, replicas=[], events=[]
)


def panel() -> connect.Connect:
    """The panel's components, unrendered: a gr.Blocks left behind in a test leaves its event loop open."""
    codes = {name: gr.Code() for name in [*connect.LANGUAGES, *connect.HARNESSES]}
    return connect.Connect(gr.Markdown(), gr.Textbox(), codes, gr.Tab("MCP"), gr.Tab(connect.AGENTS))


def test_agents_tab_for_an_endpoint() -> None:
    built = panel()
    values = connect.updates(built, URL, "Maze", Interface(), POOL, base=BASE)
    assert values[built.agents_tab].visible is True
    assert values[built.snippets["Claude Code"]] == f"claude mcp add --transport http maze {URL}/mcp\n"
    private = connect.updates(built, URL, "Maze", Interface(), POOL, base=BASE, private=True)
    assert '--header "Authorization: Bearer TOKEN"' in private[built.snippets["Claude Code"]]
    assert '"Authorization": "Bearer TOKEN"' in private[built.snippets["Cursor"]]


def test_agents_tab_before_an_endpoint_runs_shows_the_placeholder() -> None:
    built = panel()
    values = connect.updates(built, None, "Maze", Interface(), base=BASE)
    assert values[built.agents_tab].visible is True
    assert f"{BASE}/endpoints/ENDPOINT_ID/mcp" in values[built.snippets["MCP Inspector"]]


def test_no_agents_tab_for_a_space_host() -> None:
    built = panel()
    values = connect.updates(built, "https://alice-maze.hf.space", "Maze", Interface(), base=BASE)
    assert values[built.agents_tab].visible is False
    assert values[built.snippets["Codex"]] == ""


def test_every_snippet_names_where_envhub_is_reached_before_a_launch() -> None:
    built = panel()
    tools = Interface(tools=tuple(parse_tools([CONVERT_UNITS_TOOL])))
    values = connect.updates(built, None, "Toolbox", tools, base="http://10.1.2.3:8123")
    texts = {name: values[code] for name, code in built.snippets.items()}
    assert all(texts.values()) and set(texts) == {*connect.LANGUAGES, *connect.HARNESSES}
    for name, text in texts.items():
        assert "//10.1.2.3:8123/endpoints/ENDPOINT_ID" in text and "7860" not in text, name
