"""Every endpoint is an MCP server: the official `mcp` SDK's client (and openenv's own MCPToolClient, and raw
HTTP where the SDK would hide the answer) against the MCP door of launched templates."""

import asyncio
import base64
import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult, ImageContent, InitializeResult
from openenv.core.mcp_client import MCPToolClient
from websockets.sync.client import connect as websocket_connect

from tests.conftest import needs
from tests.mcpclients import mcp, structured, text_of
from tests.serving import serve_templates

NAMES = ("toolbox", "wordle", "maze", "arithmetic_tasks")
TOOLBOX = {"get_question", "calculate", "convert_units", "lookup_fact", "submit_answer"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
ACCEPT = {"accept": "application/json, text/event-stream"}
# The MCP Inspector's command line (npm @modelcontextprotocol/inspector, installed by .ci/run at a pinned version).
INSPECTOR = os.environ.get("ENVHUB_TEST_MCP_INSPECTOR") or shutil.which("mcp-inspector") or ""


@pytest.fixture(scope="module")
def urls() -> Iterator[dict[str, str]]:
    with serve_templates(*NAMES) as started:
        yield started


def api(url: str) -> tuple[httpx.Client, str]:
    """envhub's API beside the endpoint's gateway URL, and the endpoint's id."""
    base, _, endpoint_id = url.rpartition("/endpoints/")
    return httpx.Client(base_url=base, timeout=30), endpoint_id


def test_an_episode_of_a_schema_action_environment_is_played_with_generated_tools(urls: dict[str, str]) -> None:
    async def play() -> tuple[list[Any], list[CallToolResult]]:
        async with mcp(urls["wordle"]) as session:
            listed = (await session.list_tools()).tools
            results = [await session.call_tool("step", {"guess": "crane"})]  # before any reset
            results.append(await session.call_tool("reset", {"seed": 7, "options": {"answer": "plant"}}))
            for guess in ("slate", "zzzzz", "plant", "crane"):
                results.append(await session.call_tool("step", {"guess": guess}))
            results.append(await session.call_tool("state", {}))
            return listed, results

    listed, (early, reset, slate, bad, won, late, state) = asyncio.run(play())
    tools = {t.name: t for t in listed}
    assert set(tools) == {"reset", "step", "state"}
    step_schema = tools["step"].inputSchema
    assert step_schema["properties"]["guess"]["type"] == "string" and step_schema["required"] == ["guess"]
    assert "$ref" not in json.dumps(step_schema) and "$defs" not in step_schema and "metadata" not in step_schema
    assert "README" in (tools["step"].description or "") and "Wordle" in (tools["step"].description or "")
    assert all(t.outputSchema and set(t.outputSchema["required"]) == {"reward", "done", "observation"} for t in listed)

    assert early.isError and "call reset first" in text_of(early)
    assert structured(reset)["done"] is False and structured(reset)["observation"]["guesses_left"] == 6
    assert not slate.isError and structured(slate)["observation"]["guesses"][0]["word"] == "slate"
    assert bad.isError and "zzzzz" in text_of(bad)  # the environment refused it: the model reads why
    assert structured(won)["done"] is True and structured(won)["reward"] == 1.0
    assert late.isError and "episode is over" in text_of(late) and "call reset" in text_of(late)
    assert structured(state)["observation"]["answer"] == "plant" and structured(state)["done"] is True


def test_an_mcp_environment_offers_its_own_tools_and_their_results_carry_reward_and_done(
    urls: dict[str, str],
) -> None:
    async def play() -> tuple[set[str], CallToolResult, CallToolResult, CallToolResult]:
        async with mcp(urls["toolbox"]) as session:
            names = {t.name for t in (await session.list_tools()).tools}
            question = await session.call_tool("get_question", {})
            answered = await session.call_tool("submit_answer", {"answer": -1e9})
            after = await session.call_tool("calculate", {"expression": "1+1"})
            return names, question, answered, after

    names, question, answered, after = asyncio.run(play())
    assert names == TOOLBOX
    assert "?" in text_of(question) and (structured(question)["reward"], structured(question)["done"]) == (0.0, False)
    assert (structured(answered)["done"], structured(answered)["reward"]) == (True, 0.0)
    assert '"correct":false' in text_of(answered)
    assert after.isError and "episode is over" in text_of(after)


def test_the_urls_seed_and_options_begin_the_episode(urls: dict[str, str]) -> None:
    """Any client can start its session's episode from a seed or a task by its URL alone: the first observation
    comes with initialize (its instructions for the agent, its _meta for a harness)."""
    options = quote(json.dumps({"answer": "plant"}))

    async def play() -> tuple[InitializeResult, CallToolResult]:
        async with (
            httpx.AsyncClient(timeout=60) as http,
            streamable_http_client(f"{urls['wordle']}/mcp?seed=7&options={options}", http_client=http) as (r, w, _),
            ClientSession(r, w) as session,
        ):
            opened = await session.initialize()
            return opened, await session.call_tool("step", {"guess": "plant"})  # no reset call: it has begun

    opened, won = asyncio.run(play())
    assert opened.instructions is not None and "The episode has begun" in opened.instructions
    assert "guesses_left" in opened.instructions
    assert opened.meta is not None and opened.meta["envhub/opening"]["observation"]["guesses_left"] == 6
    assert structured(won)["done"] is True and structured(won)["reward"] == 1.0

    with httpx.Client(timeout=30) as http:
        for query, data in (
            ("seed=seven", {"code": "reset_argument_invalid", "argument": "seed"}),
            ("index=2", {"code": "split_required", "argument": "index"}),
        ):
            refused = http.post(f"{urls['wordle']}/mcp?{query}", json=INITIALIZE, headers=ACCEPT)
            assert refused.status_code == 200 and "mcp-session-id" not in refused.headers
            assert (refused.json()["error"]["code"], refused.json()["error"]["data"]) == (-32602, data), refused.json()


def test_a_task_of_a_split_resets_the_episode_by_tool_and_by_url(urls: dict[str, str]) -> None:
    url = urls["arithmetic_tasks"]

    async def play() -> tuple[dict[str, Any], CallToolResult, CallToolResult, CallToolResult]:
        async with mcp(url) as session:
            reset = next(t for t in (await session.list_tools()).tools if t.name == "reset")
            await session.call_tool("reset", {"split": "test", "index": 3})
            by_tool = await session.call_tool("state", {})
            unknown = await session.call_tool("reset", {"split": "dev", "index": 0})
        async with (
            httpx.AsyncClient(timeout=60) as http,
            streamable_http_client(f"{url}/mcp?split=train&index=2", http_client=http) as (r, w, _),
            ClientSession(r, w) as opened,
        ):
            await opened.initialize()
            by_url = await opened.call_tool("state", {})
        return reset.inputSchema, by_tool, unknown, by_url

    reset_schema, by_tool, unknown, by_url = asyncio.run(play())
    assert sorted(reset_schema["properties"]["split"]["enum"]) == ["test", "train"]
    assert structured(by_tool)["observation"]["task_id"] == "test-0003"
    assert unknown.isError and "dev" in text_of(unknown)
    assert structured(by_url)["observation"]["task_id"] == "train-0002"
    http, endpoint_id = api(url)
    with http:
        sessions = http.get(f"/api/endpoints/{endpoint_id}/sessions").json()["data"]
        tasks = [
            episode["task"]
            for listed in sessions
            for episode in http.get(f"/api/endpoints/{endpoint_id}/sessions/{listed['id']}").json()["episodes"]
        ]
    assert {"split": "test", "index": 3} in tasks and {"split": "train", "index": 2} in tasks


def test_an_observations_image_is_image_content(urls: dict[str, str]) -> None:
    async def play() -> CallToolResult:
        async with mcp(urls["maze"]) as session:
            return await session.call_tool("reset", {"seed": 1})

    reset = asyncio.run(play())
    [image] = [c for c in reset.content if isinstance(c, ImageContent)]
    assert image.mimeType == "image/png" and base64.b64decode(image.data).startswith(b"\x89PNG\r\n\x1a\n")
    shown = structured(reset)["observation"]["image_png_base64"]
    assert shown.startswith("<image 1: image/png") and image.data not in text_of(reset)
    assert "#" in structured(reset)["observation"]["grid"]


def test_a_client_that_asks_for_sse_gets_it_and_json_otherwise(urls: dict[str, str]) -> None:
    url = f"{urls['wordle']}/mcp"
    with httpx.Client(timeout=30) as http:
        opened = http.post(url, json=INITIALIZE, headers={"accept": "text/event-stream"})
        assert opened.status_code == 200 and opened.headers["content-type"].startswith("text/event-stream")
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        [data] = [line.removeprefix("data: ") for line in opened.text.splitlines() if line.startswith("data: ")]
        assert json.loads(data)["result"]["protocolVersion"] == "2025-06-18"
        assert json.loads(data)["result"]["capabilities"]["tools"] == {"listChanged": False}

        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert http.post(url, json=initialized, headers=session | ACCEPT).status_code == 202
        ping = http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=session | ACCEPT)
        assert ping.headers["content-type"] == "application/json"
        assert ping.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        streamed = http.post(
            url,
            json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
            headers=session | {"accept": "application/json;q=0.5, text/event-stream"},
        )
        assert streamed.headers["content-type"].startswith("text/event-stream") and '"step"' in streamed.text
        assert http.get(url, headers=session).status_code == 405
        assert http.delete(url, headers=session).status_code == 204
        gone = http.post(url, json={"jsonrpc": "2.0", "id": 4, "method": "ping"}, headers=session | ACCEPT)
        assert (gone.status_code, gone.json()["error"]["data"]["code"]) == (404, "session_unknown")


def test_a_client_that_waits_for_100_continue_gets_it_then_its_answer(urls: dict[str, str]) -> None:
    # curl, for one, asks before sending a body over a KiB; the door's answers, written whole at once, must not hold
    # back the interim answer the client waits for.
    parts = urlsplit(f"{urls['wordle']}/mcp")
    body = json.dumps(INITIALIZE | {"padding": "x" * 2048}).encode()
    head = (
        f"POST {parts.path} HTTP/1.1\r\nhost: {parts.netloc}\r\ncontent-type: application/json\r\n"
        f"accept: application/json\r\ncontent-length: {len(body)}\r\nexpect: 100-continue\r\n\r\n"
    )
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head.encode())
        assert sock.recv(4096) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            assert chunk, answer
            answer += chunk
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 200 OK"
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["result"]["serverInfo"]["name"]


def test_a_newer_or_unknown_protocol_version_is_negotiated(urls: dict[str, str]) -> None:
    url = f"{urls['wordle']}/mcp"
    with httpx.Client(timeout=30) as http:
        future = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": "2099-01-01"}}  # type: ignore[dict-item]
        opened = http.post(url, json=future, headers=ACCEPT)
        assert opened.json()["result"]["protocolVersion"] == "2025-11-25"
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        old = session | ACCEPT | {"mcp-protocol-version": "1999"}
        bad = http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=old)
        assert (bad.status_code, bad.json()["error"]["data"]["code"]) == (400, "protocol_version_unsupported")
        assert "2025-11-25" in bad.json()["error"]["data"]["supported"]
        assert http.delete(url, headers=session).status_code == 204


def test_bad_input_is_answered_with_what_to_do(urls: dict[str, str]) -> None:
    url = f"{urls['wordle']}/mcp"
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}
    with httpx.Client(timeout=30) as http:
        unknown = http.post(url, json=call, headers=ACCEPT | {"mcp-session-id": "no-such-session"})
        assert (unknown.status_code, unknown.json()["error"]["data"]["code"]) == (404, "session_unknown")

        early = http.post(url, json=call, headers=ACCEPT | {"mcp-protocol-version": "2025-06-18"})
        assert early.status_code == 400
        assert early.json()["id"] == 9 and early.json()["error"]["data"]["code"] == "session_required"
        ping = http.post(url, json={"jsonrpc": "2.0", "id": 10, "method": "ping"}, headers=ACCEPT)
        assert (ping.status_code, ping.json()["error"]["data"]["code"]) == (400, "session_required")

        foreign = http.post(url, json=INITIALIZE, headers=ACCEPT | {"origin": "http://evil.example"})
        assert (foreign.status_code, foreign.json()["code"]) == (403, "origin_refused")

        padded = {**INITIALIZE, "params": {**INITIALIZE["params"], "padding": "x" * (1024 * 1024 + 1)}}  # type: ignore[dict-item]
        oversized = http.post(url, json=padded, headers=ACCEPT)
        assert (oversized.status_code, oversized.json()["code"]) == (413, "payload_too_large")

        typed = ACCEPT | {"content-type": "application/json", "mcp-session-id": "x"}
        not_json = http.post(url, content=b"{", headers=typed)
        assert not_json.status_code == 400 and not_json.json()["error"]["code"] == -32700


def test_a_method_the_door_does_not_know_is_method_not_found_with_or_without_a_session(urls: dict[str, str]) -> None:
    # A 2026-07-28 draft client (Claude Code) opens with server/discover, with that version's header and no session.
    url = f"{urls['wordle']}/mcp"
    discover = {"jsonrpc": "2.0", "id": "d-1", "method": "server/discover", "params": {}}
    with httpx.Client(timeout=30) as http:
        for headers in (ACCEPT | {"mcp-protocol-version": "2026-07-28"}, ACCEPT):
            refused = http.post(url, json=discover, headers=headers)
            assert refused.status_code == 200  # an error answers a request as any answer (Streamable HTTP 2025-11-25)
            assert refused.json()["id"] == "d-1" and refused.json()["error"]["code"] == -32601
        cancelled = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "d-1"}}
        assert (
            http.post(url, json=cancelled, headers=ACCEPT | {"mcp-protocol-version": "2026-07-28"}).status_code == 202
        )

        opened = http.post(url, json=INITIALIZE, headers=ACCEPT)
        session = ACCEPT | {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        for method in ("server/discover", "resources/list"):
            inside = http.post(url, json={"jsonrpc": "2.0", "id": 7, "method": method}, headers=session)
            assert inside.status_code == 200 and inside.json()["error"]["code"] == -32601 and inside.json()["id"] == 7
        listed = http.post(url, json={"jsonrpc": "2.0", "id": 8, "method": "tools/list"}, headers=session)
        assert {t["name"] for t in listed.json()["result"]["tools"]} == {"reset", "step", "state"}
        assert http.delete(url, headers=session).status_code == 204


def test_an_unknown_tool_is_a_protocol_error(urls: dict[str, str]) -> None:
    async def call() -> str:
        async with mcp(urls["wordle"]) as session:
            with pytest.raises(McpError) as refused:
                await session.call_tool("guess", {"word": "crane"})
            return refused.value.error.message

    message = asyncio.run(call())
    assert "no tool 'guess'" in message and "reset, state, step" in message


def test_openenv_s_own_json_rpc_keeps_working_on_the_same_url(urls: dict[str, str]) -> None:
    url = urls["toolbox"]

    async def with_openenv_client() -> tuple[set[str], Any]:
        async with MCPToolClient(base_url=url) as env:
            names = {t.name for t in await env.list_tools()}
            return names, await env.call_tool("calculate", expression="6 * 7")

    names, value = asyncio.run(with_openenv_client())
    assert names == TOOLBOX and value == 42

    bare = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30).json()
    assert {t["name"] for t in bare["result"]["tools"]} == TOOLBOX  # no initialize, no session: OpenEnv answers
    with websocket_connect(url.replace("http", "ws", 1) + "/mcp") as ws:
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_question"}}))
        assert "?" in json.dumps(json.loads(ws.recv(timeout=30))["result"])


def test_a_recorded_agent_session_is_read_back_with_its_rewards_and_exported_as_messages(
    urls: dict[str, str],
) -> None:
    async def play() -> None:
        async with mcp(urls["wordle"]) as session:
            await session.call_tool("reset", {"seed": 3, "options": {"answer": "crane"}})
            await session.call_tool("step", {"guess": "zzzzz"})
            await session.call_tool("step", {"guess": "slate"})
            await session.call_tool("step", {"guess": "crane"})
            await session.call_tool("reset", {"seed": 4, "options": {"answer": "plant"}})
            await session.call_tool("step", {"guess": "crane"})

    asyncio.run(play())  # leaving the client's context ends the session (DELETE)
    http, endpoint_id = api(urls["wordle"])
    with http:
        listed = http.get(f"/api/endpoints/{endpoint_id}/sessions").json()
        ours = [s for s in listed["data"] if s["episode_count"] == 2]
        assert ours, listed
        summary = ours[0]
        assert summary["status"] == "ended" and summary["reward"] == 1.0 and summary["client"].startswith("mcp")
        assert summary["tools"] == ["reset", "step", "state"]
        session = http.get(f"/api/endpoints/{endpoint_id}/sessions/{summary['id']}").json()
        first, second = session["episodes"]
        assert (first["status"], first["reward"], first["steps"], first["invalid"]) == ("done", 1.0, 2, 1)
        assert [r["kind"] for r in first["records"]] == ["reset", "step", "step", "step"]
        assert first["records"][-1]["done"] is True and first["records"][-1]["action"] == {"guess": "crane"}
        assert (second["status"], second["reward"], second["code"]) == ("cut", 0.0, "client_ended")

        viewed = http.get(f"/api/evaluations/episodes/{first['id']}").json()  # what the episode viewer opens
        assert viewed["records"] == first["records"]

        base = f"/api/endpoints/{endpoint_id}/sessions/{summary['id']}"
        lines = [json.loads(line) for line in http.get(f"{base}/messages.jsonl").text.splitlines()]
        assert [line["reward"] for line in lines] == [1.0, 0.0] and lines[0]["done"] is True
        messages = lines[0]["messages"]
        assert [m["role"] for m in messages] == ["assistant", "tool"] * 4
        assert messages[0]["tool_calls"][0]["function"]["name"] == "reset"
        assert json.loads(messages[-2]["tool_calls"][0]["function"]["arguments"]) == {"guess": "crane"}
        assert messages[-1]["tool_call_id"] == messages[-2]["tool_calls"][0]["id"]
        assert json.loads(messages[-1]["content"])["guesses"][-1]["word"] == "crane"
        assert [t["tool_name"] for t in lines[0]["tool_trace"]] == ["reset", "step", "step", "step"]
        episodes = [json.loads(line) for line in http.get(f"{base}/episodes.jsonl").text.splitlines()]
        assert [e["reward"] for e in episodes] == [1.0, 0.0]
        assert episodes[0]["session"]["environment"] == "template:wordle"

        assert http.get(f"/api/endpoints/{endpoint_id}/sessions/as-nosuch").status_code == 404


@needs("the MCP Inspector", os.path.isfile(INSPECTOR), "install it with npm (see .ci/run)")
def test_the_mcp_inspector_lists_an_endpoints_tools_and_calls_one(urls: dict[str, str]) -> None:
    def inspect(url: str, *method: str) -> Any:
        command = [INSPECTOR, "--cli", f"{url}/mcp", "--transport", "http", "--method", *method]
        done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    listed = inspect(urls["toolbox"], "tools/list")
    assert {t["name"] for t in listed["tools"]} == TOOLBOX
    reset = inspect(urls["wordle"], "tools/call", "--tool-name", "reset", "--tool-arg", "seed=5")
    assert reset["isError"] is False and reset["structuredContent"]["observation"]["guesses_left"] == 6
