"""The Connect panel's snippets, run as a user would paste them, against built-in environments
launched by envhub and reached through its gateway; the TRL one trains with real trl 1.16 in the trainer's
virtualenv."""

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from app.settings import REPO_ROOT
from app.ui.connect import target_for
from app.ui.snippets import all_snippets, claude_code, inspector, trl
from core.outbound import OutboundGuard, OutboundSession
from envclient.interface import Interface, read_interface
from hosting.models import PoolPublic
from tests.conftest import needs, needs_trainer
from tests.corpus import corpus_envhub
from tests.serving import serve_templates

# The MCP Inspector's command line, installed by .ci/run (the snippet's npx fetches it).
INSPECTOR = os.environ.get("ENVHUB_TEST_MCP_INSPECTOR") or shutil.which("mcp-inspector") or ""


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


def run_python(code: str, tmp_path: Path, python: Path = Path(sys.executable), timeout_s: float = 60) -> str:
    result = subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=tmp_path,
        env={
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_OFFLINE": "1",
            "TRL_EXPERIMENTAL_SILENCE": "1",
            "PATH": "/usr/bin:/bin",
        },
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


# What the test changes in the pasted text: a tiny local model for Qwen/Qwen3-0.6B (no download; built by
# examples/tiny_model.py with TRL's Qwen3 template), two steps for 200, and what the snippet's comment says to add on
# a CPU.
TINY_MODEL = "import sys; from pathlib import Path; from examples.tiny_model import build; build(Path(sys.argv[1]))"


@needs_trainer
@pytest.mark.timeout(600)
def test_trl_snippet_trains_through_the_endpoint(
    tmp_path_factory: pytest.TempPathFactory, trainer_python: Path, tmp_path: Path
) -> None:
    envhub = corpus_envhub(tmp_path_factory.mktemp("trl-run"), corpus=False)
    try:
        endpoint = envhub.running("template:maze", options={"env": {"MAX_CONCURRENT_ENVS": "4"}})
        pool = PoolPublic.model_validate(envhub.endpoint(endpoint["id"])["pool"])
        code = trl(target_for(endpoint["url"], "Maze", asyncio.run(probed(endpoint["url"])), pool))
        assert "generation_batch_size=4," in code  # what the pool holds: 4 sessions on its one replica
        model = tmp_path / "tiny-qwen3"
        built = subprocess.run(
            [str(trainer_python), "-c", TINY_MODEL, str(model)], cwd=REPO_ROOT, capture_output=True, timeout=300
        )
        assert built.returncode == 0, built.stderr[-2000:]
        before = envhub.endpoint(endpoint["id"])["stats"]  # reading its interface counted a few requests
        pasted = code.replace('"Qwen/Qwen3-0.6B"', repr(str(model)))
        pasted = pasted.replace("max_steps=200,", "max_steps=2, use_cpu=True, bf16=False,")
        assert pasted.count(str(model)) == 1 and "max_steps=2," in pasted
        run_python(pasted, tmp_path, trainer_python, timeout_s=480)
        assert (tmp_path / "trainer_output" / "checkpoint-2").is_dir()  # both steps trained and saved
        stats = envhub.endpoint(endpoint["id"])["stats"]
        # TRL held one session per rollout of its generation batch, each reset through the gateway, and none failed.
        assert (stats["sessions"] - before["sessions"], stats["errors"] - before["errors"]) == (4, 0)
    finally:
        envhub.stop()
