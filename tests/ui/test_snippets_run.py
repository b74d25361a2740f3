"""The Connect panel's snippets, run as a user would paste them, against built-in environments
launched by envhub and reached through its gateway."""

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from app.ui.connect import target_for
from app.ui.snippets import all_snippets, claude_code, inspector
from core.outbound import OutboundGuard, OutboundSession
from protocol.interface import Interface, read_interface
from tests.conftest import needs
from tests.serving import serve_templates

# TRL and datasets are not dependencies of envhub: stand-ins that drive the snippet's
# environment class the way GRPOTrainer's environment_factory does (reset, then tool calls).
TRL_STUB = textwrap.dedent(
    """
    import inspect
    import json
    import os

    class GRPOConfig:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    class GRPOTrainer:
        def __init__(self, *, environment_factory, reward_funcs, train_dataset, **kwargs):
            self.factory, self.reward_funcs = environment_factory, reward_funcs

        def train(self):
            env = self.factory()
            print("RESET", env.reset(prompt="ignored"))
            calls = json.loads(os.environ["TOOL_CALLS"])
            for name, arguments in calls:
                print("TOOL", name, getattr(env, name)(**arguments))
            print("REWARD", self.reward_funcs([env]))
    """
)
# The MCP Inspector's command line, installed by .ci/run (the snippet's npx fetches it).
INSPECTOR = os.environ.get("ENVHUB_TEST_MCP_INSPECTOR") or shutil.which("mcp-inspector") or ""
DATASETS_STUB = "class Dataset:\n    @staticmethod\n    def from_dict(columns):\n        return columns\n"


@pytest.fixture(scope="module")
def urls() -> Iterator[dict[str, str]]:
    with serve_templates("toolbox", "maze") as launched:
        yield launched


async def probed(url: str) -> Interface:
    outbound = OutboundSession(OutboundGuard(allow_private=True))
    try:
        return await read_interface(url, outbound)
    finally:
        await outbound.aclose()


def snippets(url: str, title: str) -> tuple[dict[str, str], Interface]:
    info = asyncio.run(probed(url))
    return all_snippets(target_for(url, title, info)), info


def run_python(code: str, tmp_path: Path, **env: str) -> str:
    (tmp_path / "trl.py").write_text(TRL_STUB)
    (tmp_path / "datasets.py").write_text(DATASETS_STUB)
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "HF_HUB_DISABLE_TELEMETRY": "1", "PATH": "/usr/bin:/bin"} | env,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_maze_snippets_run(urls: dict[str, str], tmp_path: Path) -> None:
    code, info = snippets(urls["maze"], "Maze")
    assert info.action_schema is not None and not info.tools
    for name in ("Python", "Python (async)"):
        out = run_python(code[name], tmp_path)
        assert "'grid':" in out and "-0.01 False" in out, name  # reset's observation, then one step
    out = run_python(code["WebSocket"], tmp_path)
    assert out.count('{"type":"observation"') == 2 and '"step_count":1' in out
    out = run_python(code["TRL"], tmp_path, TOOL_CALLS='[["act", {"direction": "down"}], ["act", {"direction": "up"}]]')
    assert out.startswith("RESET {") and out.count("TOOL act {") == 2 and "REWARD [" in out
    for line in code["curl"].splitlines():
        answer = subprocess.run(line.split(), capture_output=True, text=True, timeout=30, check=True).stdout
        assert answer.startswith("{")


@pytest.mark.slow  # the snippets are the same for every environment: test_maze_snippets_run runs them
def test_toolbox_snippets_run(urls: dict[str, str], tmp_path: Path) -> None:
    code, info = snippets(urls["toolbox"], "Toolbox")
    assert {t.name for t in info.tools or ()} >= {"calculate", "convert_units", "get_question", "submit_answer"}
    out = run_python(code["MCP"], tmp_path)
    assert "calculate" in out and "convert_units" in out
    out = run_python(code["Python"], tmp_path)
    assert "'question':" in out and "'tool_name':" in out
    calls = '[["get_question", {}], ["calculate", {"expression": "6 * 7"}]]'
    out = run_python(code["TRL"], tmp_path, TOOL_CALLS=calls)
    assert "TOOL get_question {" in out and '"data": 42' in out.replace("42.0", "42")
    tools_list = next(line for line in code["curl"].splitlines() if "tools/list" in line)
    answer = subprocess.run(["bash", "-c", tools_list], capture_output=True, text=True, timeout=30, check=True)
    assert '"calculate"' in answer.stdout


async def listed_tools(mcp_url: str) -> set[str]:
    """What a harness sees at the URL: an MCP session over Streamable HTTP, then tools/list."""
    async with (
        httpx.AsyncClient(timeout=60) as http,
        streamable_http_client(mcp_url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return {tool.name for tool in (await session.list_tools()).tools}


def test_agents_url_is_an_mcp_server_for_any_environment(urls: dict[str, str]) -> None:
    for name, title, expected in [("maze", "Maze", {"reset", "step", "state"}), ("toolbox", "Toolbox", {"calculate"})]:
        mcp_url = shlex.split(claude_code(target_for(urls[name], title, asyncio.run(probed(urls[name])))))[-1]
        assert mcp_url == urls[name] + "/mcp"
        assert asyncio.run(listed_tools(mcp_url)) >= expected, name


@needs("the MCP Inspector", os.path.isfile(INSPECTOR), "install it with npm (see .ci/run)")
def test_inspector_line_lists_the_tools(urls: dict[str, str]) -> None:
    command = shlex.split(inspector(target_for(urls["maze"], "Maze", Interface())))
    assert command[:2] == ["npx", "@modelcontextprotocol/inspector"]
    done = subprocess.run([INSPECTOR, *command[2:]], capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr
    assert {tool["name"] for tool in json.loads(done.stdout)["tools"]} == {"reset", "step", "state"}
