"""The model door: an agent run's harness calls its model at envhub with the run's credential, in each model API's
dialect, streamed and not; envhub passes each call on to the run's preset's server (a scripted model here) with the
preset's key, and records it. Clients are the OpenAI SDK and httpx, against a real envhub."""

import asyncio
import json
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import settings_for, wait_until
from tests.fakehub import FakeHub
from tests.scripted_model import Ask, ScriptedModel, Turn, play
from tests.serving import TEMPLATES, Envhub, free_port
from tests.test_presets import every_logger_at_debug

KEY = "sk-door-" + secrets.token_hex(16)
ALICE = {"Authorization": "Bearer hf_test"}  # the fake Hub's alice
BOB = {"Authorization": "Bearer hf_bob"}
TOOLS = [{"type": "function", "function": {"name": "mcp__env__guess", "parameters": {"type": "object"}}}]
MESSAGES = [{"role": "system", "content": "You play arithmetic."}, {"role": "user", "content": "Solve 2+2."}]


@pytest.fixture(scope="module")
def hub_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    """One envhub for the module (its tests tell their runs apart by id), with the fake Hub's alice and bob."""
    scratch = tmp_path_factory.mktemp("model-door")
    with FakeHub() as hub:
        hub.users["hf_bob"] = "bob"
        settings = settings_for(f"sqlite:///{scratch / 'envhub.db'}", hub, TEMPLATES)
        server = Envhub(settings.model_copy(update={"data_dir": scratch / "data", "allow_private_urls": True}))
        try:
            yield server
        finally:
            server.end_endpoints()
            server.stop()


@pytest.fixture(scope="module")
def endpoint(hub_server: Envhub) -> str:
    endpoint_id: str = hub_server.running("template:arithmetic_tasks")["id"]
    return endpoint_id


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    scripted = ScriptedModel(play("guess", [{"answer": 4}], "The answer is 4."))
    yield scripted
    scripted.close()


def preset(hub_server: Envhub, url: str, name: str = "scripted", **extra: Any) -> None:
    body = {"base_url": url + "/v1", "model": "served-model", "api_key": KEY, **extra}
    assert hub_server.http.put(f"/api/models/{name}", json=body, headers=ALICE).status_code == 200


def start_run(hub_server: Envhub, endpoint: str, name: str = "scripted", **extra: Any) -> dict[str, Any]:
    response = hub_server.http.post(
        "/api/agent-runs", json={"endpoint": endpoint, "preset": name, "harness": "own", **extra}, headers=ALICE
    )
    assert response.status_code == 201, response.text
    started: dict[str, Any] = response.json()
    return started


def record(hub_server: Envhub, run_id: str, calls: int) -> dict[str, Any]:
    """The run and its calls, once its `calls` calls are written (the door writes each just after its answer)."""
    found: dict[str, Any] = {}

    def written() -> bool:
        response = hub_server.http.get(f"/api/agent-runs/{run_id}", headers=ALICE)
        assert response.status_code == 200, response.text
        found.update(response.json())
        # The run and its calls are read one after the other: the run's own figures say when both are there.
        return found["run"]["calls"] >= calls and len(found["calls"]) >= calls

    wait_until(written)
    return found


def test_a_run_s_chat_calls_pass_through_streamed_and_not_and_are_recorded(
    hub_server: Envhub, endpoint: str, model: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    preset(hub_server, model.url)
    with every_logger_at_debug(caplog):
        started = start_run(hub_server, endpoint)
        run_id, credential = started["run"]["id"], started["credential"]
        assert started["model_url"] == hub_server.url + "/model/v1"
        assert started["mcp_url"] == f"{hub_server.url}/endpoints/{endpoint}/mcp"
        assert started["headers"] == {"X-Envhub-Run": credential}
        client = openai.OpenAI(base_url=started["model_url"], api_key=credential, max_retries=0)
        first = client.chat.completions.create(model="anything", messages=MESSAGES, tools=TOOLS)  # type: ignore[arg-type]
        call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
        assert (call.function.name, json.loads(call.function.arguments)) == ("mcp__env__guess", {"answer": 4})  # type: ignore[union-attr]
        after = [
            *MESSAGES,
            first.choices[0].message.model_dump(include={"role", "content", "tool_calls"}),
            {"role": "tool", "tool_call_id": call.id, "content": "correct"},
        ]
        stream: Any = client.chat.completions.create(
            model="anything",
            messages=after,  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            stream=True,
            extra_headers={"x-session-id": "harness-session-1"},
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        assert text == "The answer is 4."
        stream.close()
        shown = record(hub_server, run_id, 2)

    # The scripted server got the preset's model and key, never the run's credential.
    assert [s.body["model"] for s in model.seen] == ["served-model", "served-model"]
    assert {s.headers["authorization"] for s in model.seen} == {f"Bearer {KEY}"}
    assert not any(credential in json.dumps(s.headers) for s in model.seen)
    calls = shown["calls"]
    assert [(c["index"], c["dialect"], c["stream"], c["status"], c["code"]) for c in calls] == [
        (0, "chat", False, 200, ""),
        (1, "chat", True, 200, ""),
    ]
    assert calls[0]["request"]["messages"][0] == MESSAGES[0] and calls[0]["request"]["tools"] == TOOLS
    assert calls[0]["request"]["model"] == "anything"  # as the harness sent it
    assert calls[0]["tool_calls"] == [{"id": call.id, "name": "mcp__env__guess", "arguments": '{"answer": 4}'}]
    assert calls[0]["finish_reason"] == "tool_calls" and calls[1]["finish_reason"] == "stop"
    assert calls[1]["text"] == "The answer is 4." and calls[1]["response"]["choices"][0]["message"]["content"] == text
    assert calls[1]["first_token_s"] is not None and calls[1]["wall_s"] >= calls[1]["first_token_s"]
    for c in calls:
        assert c["usage"]["input_tokens"] > 0 and c["usage"]["output_tokens"] > 0
        assert c["prompt_token_ids"] is None  # the preset does not say token ids
    run = shown["run"]
    assert (run["calls"], run["status"], run["client_sessions"]) == (2, "running", ["harness-session-1"])
    assert run["output_tokens"] == sum(c["usage"]["output_tokens"] for c in calls)
    assert calls[1]["client_session"] == "harness-session-1"

    # The preset's key is in no answer, record or log line.
    listed = hub_server.http.get("/api/agent-runs", headers=ALICE)
    assert run_id in [r["id"] for r in listed.json()]
    exported = [hub_server.http.get(f"/api/agent-runs/{run_id}/{kind}.jsonl", headers=ALICE) for kind in ("sft", "rl")]
    assert [e.status_code for e in exported] == [200, 409]  # rl: no token ids recorded
    assert exported[0].text.count("\n") == 1  # one conversation chain
    for text_shown in (json.dumps(shown), listed.text, json.dumps(started), caplog.text, *(e.text for e in exported)):
        assert KEY not in text_shown
    # Nor is the run another user's to read or end.
    assert hub_server.http.get(f"/api/agent-runs/{run_id}", headers=BOB).status_code == 404
    assert hub_server.http.post(f"/api/agent-runs/{run_id}/end", headers=BOB).status_code == 404
    assert hub_server.http.get("/api/agent-runs", headers=BOB).json() == []


@pytest.mark.parametrize("stream", [False, True])
def test_responses_calls_with_a_namespace_s_tools_pass_through_and_are_recorded(
    hub_server: Envhub, endpoint: str, model: ScriptedModel, stream: bool
) -> None:
    preset(hub_server, model.url)
    started = start_run(hub_server, endpoint, harness="codex")
    client = openai.OpenAI(base_url=started["model_url"], api_key=started["credential"], max_retries=0)
    tools = [{"type": "namespace", "name": "mcp__env", "tools": [{"type": "function", "name": "guess"}]}]
    asked: dict[str, Any] = {"model": "gpt", "instructions": "Play.", "input": "Solve 2+2.", "tools": tools}
    if stream:
        with client.responses.stream(**asked) as events:
            kinds = [event.type for event in events]
            answer = events.get_final_response()
        assert kinds[0] == "response.created" and "response.function_call_arguments.delta" in kinds
    else:
        answer = client.responses.create(**asked)
    item: Any = answer.output[0]
    assert (item.type, item.name, item.namespace, item.arguments) == (
        "function_call",
        "guess",
        "mcp__env",
        '{"answer": 4}',
    )
    call = record(hub_server, started["run"]["id"], 1)["calls"][0]
    assert (call["dialect"], call["stream"], call["status"]) == ("responses", stream, 200)
    assert call["request"]["instructions"] == "Play." and call["request"]["tools"] == tools
    assert call["tool_calls"] == [
        {"id": "call_0", "name": "guess", "namespace": "mcp__env", "arguments": '{"answer": 4}'}
    ]
    assert call["response"]["output"][0]["namespace"] == "mcp__env"
    assert call["usage"]["input_tokens"] > 0 and call["usage"]["output_tokens"] > 0


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_messages_calls_pass_through_and_are_recorded(
    hub_server: Envhub, endpoint: str, model: ScriptedModel, stream: bool
) -> None:
    preset(hub_server, model.url)
    started = start_run(hub_server, endpoint, harness="claude-code")
    body = {
        "model": "claude",
        "max_tokens": 100,
        "system": "Play.",
        "messages": [{"role": "user", "content": "Solve 2+2."}],
        "tools": [{"name": "mcp__env__guess", "input_schema": {"type": "object"}}],
        "stream": stream,
    }
    headers = {"x-api-key": started["credential"], "anthropic-version": "2023-06-01"}
    headers["X-Claude-Code-Session-Id"] = "claude-session"
    answer = httpx.post(started["anthropic_base_url"] + "/v1/messages", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    if stream:
        kinds = [line.removeprefix("event: ") for line in answer.text.splitlines() if line.startswith("event: ")]
        assert kinds[0] == "message_start" and kinds[-1] == "message_stop" and "content_block_delta" in kinds
    else:
        assert answer.json()["content"][0]["input"] == {"answer": 4}
    assert model.seen[-1].headers["anthropic-version"] == "2023-06-01"
    shown = record(hub_server, started["run"]["id"], 1)
    call = shown["calls"][0]
    assert (call["dialect"], call["stream"], call["finish_reason"]) == ("messages", stream, "tool_use")
    assert call["request"]["system"] == "Play."
    assert call["tool_calls"] == [{"id": "toolu_0", "name": "mcp__env__guess", "arguments": '{"answer": 4}'}]
    assert call["response"]["content"][0]["input"] == {"answer": 4}
    assert call["usage"]["input_tokens"] > 0 and call["usage"]["output_tokens"] > 0
    assert shown["run"]["client_sessions"] == ["claude-session"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_vllm_preset_s_token_ids_and_logprobs_are_recorded_and_prefix_the_next_call(
    hub_server: Envhub, endpoint: str, model: ScriptedModel, stream: bool
) -> None:
    preset(hub_server, model.url, token_ids=True)
    started = start_run(hub_server, endpoint)
    client = openai.OpenAI(base_url=started["model_url"], api_key=started["credential"], max_retries=0)
    first = client.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS)  # type: ignore[arg-type]
    call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
    after = [
        *MESSAGES,
        first.choices[0].message.model_dump(include={"role", "content", "tool_calls"}),
        {"role": "tool", "tool_call_id": call.id, "content": "correct"},
    ]
    answer = httpx.post(
        started["model_url"] + "/chat/completions",
        json={"model": "m", "messages": after, "tools": TOOLS, "stream": stream},
        headers={"Authorization": f"Bearer {started['credential']}"},
    )
    assert answer.status_code == 200
    assert all(s.body["return_token_ids"] is True and s.body["logprobs"] is True for s in model.seen)
    calls = record(hub_server, started["run"]["id"], 2)["calls"]
    for c in calls:
        assert c["prompt_token_ids"] and c["completion_token_ids"]
        assert len(c["completion_logprobs"]) == len(c["completion_token_ids"])
        assert all(isinstance(p, float) and p < 0 for p in c["completion_logprobs"])
    earlier = calls[0]["prompt_token_ids"] + calls[0]["completion_token_ids"]
    assert calls[1]["prompt_token_ids"][: len(earlier)] == earlier
    assert bytes(calls[1]["completion_token_ids"]).decode().startswith("The answer is 4.")


def test_a_credential_is_its_run_s_only_and_refused_once_the_run_ended(
    hub_server: Envhub, endpoint: str, model: ScriptedModel
) -> None:
    preset(hub_server, model.url)
    a, b = start_run(hub_server, endpoint), start_run(hub_server, endpoint)
    chat = {"model": "m", "messages": MESSAGES}
    url = a["model_url"] + "/chat/completions"

    def ask(credential: str, headers: str = "authorization") -> httpx.Response:
        sent = {"authorization": f"Bearer {credential}"} if headers == "authorization" else {"x-api-key": credential}
        return httpx.post(url, json=chat, headers=sent)

    assert ask(a["credential"]).status_code == 200
    made_up = a["credential"][:-4] + "AAAA"
    for credential in (made_up, "envhub-run.ar-000000000000.x", "sk-anything"):
        refused = ask(credential)
        assert (refused.status_code, refused.json()["error"]["code"]) == (401, "run_unknown")
    anthropic = httpx.post(a["anthropic_base_url"] + "/v1/messages", json=chat, headers={"x-api-key": made_up})
    assert anthropic.status_code == 401 and anthropic.json()["error"]["code"] == "run_unknown"
    assert anthropic.json()["type"] == "error"

    ended = hub_server.http.post(f"/api/agent-runs/{a['run']['id']}/end", headers=ALICE)
    assert ended.status_code == 200 and ended.json()["status"] == "stopped"
    refused = ask(a["credential"], "x-api-key")
    assert (refused.status_code, refused.json()["error"]["code"]) == (401, "run_ended")
    assert ask(b["credential"]).status_code == 200  # the other run goes on
    assert [c["run"] for c in record(hub_server, a["run"]["id"], 1)["calls"]] == [a["run"]["id"]]
    assert len(record(hub_server, b["run"]["id"], 1)["calls"]) == 1


def test_past_its_calls_limit_a_run_is_stopped_and_the_harness_told_run_limit(
    hub_server: Envhub, endpoint: str, model: ScriptedModel
) -> None:
    preset(hub_server, model.url)
    started = start_run(hub_server, endpoint, limits={"max_calls": 2})
    client = openai.OpenAI(base_url=started["model_url"], api_key=started["credential"], max_retries=0)
    for _ in range(2):
        client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert limited.value.status_code == 429 and limited.value.code == "run_limit"
    shown = record(hub_server, started["run"]["id"], 3)
    assert (shown["run"]["status"], shown["run"]["code"]) == ("stopped", "run_limit")
    assert [(c["status"], c["code"]) for c in shown["calls"]] == [(200, ""), (200, ""), (429, "run_limit")]
    assert len(model.seen) == 2
    with pytest.raises(openai.AuthenticationError) as ended:
        client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert ended.value.code == "run_ended"


def test_a_run_ended_after_its_calls_were_admitted_refuses_its_very_next_call(
    hub_server: Envhub, endpoint: str, model: ScriptedModel
) -> None:
    preset(hub_server, model.url)
    started = start_run(hub_server, endpoint)
    run_id, url = started["run"]["id"], started["model_url"] + "/chat/completions"
    auth = {"authorization": f"Bearer {started['credential']}"}
    for _ in range(3):  # admitted, and so known to the door
        assert httpx.post(url, json={"model": "m", "messages": MESSAGES}, headers=auth).status_code == 200
    assert hub_server.http.post(f"/api/agent-runs/{run_id}/end", headers=ALICE).status_code == 200
    for stream in (False, True):
        refused = httpx.post(url, json={"model": "m", "messages": MESSAGES, "stream": stream}, headers=auth)
        assert (refused.status_code, refused.json()["error"]["code"]) == (401, "run_ended")
    assert len(model.seen) == 3
    assert [c["status"] for c in record(hub_server, run_id, 3)["calls"]] == [200, 200, 200]


def test_calls_at_once_never_pass_a_run_s_calls_limit(hub_server: Envhub, endpoint: str) -> None:
    model = ScriptedModel(lambda _ask: Turn(text="slow enough for the calls to overlap", delay_s=0.3))
    try:
        preset(hub_server, model.url)
        started = start_run(hub_server, endpoint, limits={"max_calls": 3})
        url, auth = started["model_url"] + "/chat/completions", {"authorization": f"Bearer {started['credential']}"}
        assert httpx.post(url, json={"model": "m", "messages": MESSAGES}, headers=auth).status_code == 200

        async def ask_all() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=30) as client:
                body = {"model": "m", "messages": MESSAGES}
                return await asyncio.gather(*(client.post(url, json=body, headers=auth) for _ in range(10)))

        answers = asyncio.run(ask_all())
        assert len(model.seen) == 3
        assert sorted(a.status_code for a in answers).count(200) == 2
        refused = {(a.status_code, a.json()["error"]["code"]) for a in answers if a.status_code != 200}
        assert (429, "run_limit") in refused and refused <= {(429, "run_limit"), (401, "run_ended")}
        run = record(hub_server, started["run"]["id"], 3)["run"]
        assert (run["status"], run["code"]) == ("stopped", "run_limit")
    finally:
        model.close()


def test_on_a_server_without_sign_in_a_run_started_by_nobody_in_particular_is_read_and_exported(
    hub_server: Envhub, endpoint: str, model: ScriptedModel
) -> None:
    body = {"base_url": model.url + "/v1", "model": "served-model", "api_key": KEY}
    assert hub_server.http.put("/api/models/mine", json=body).status_code == 200
    response = hub_server.http.post("/api/agent-runs", json={"endpoint": endpoint, "preset": "mine"})
    assert response.status_code == 201, response.text
    started = response.json()
    run_id = started["run"]["id"]
    client = openai.OpenAI(base_url=started["model_url"], api_key=started["credential"], max_retries=0)
    client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]

    def written() -> bool:
        return len(hub_server.http.get(f"/api/agent-runs/{run_id}").json()["calls"]) == 1

    wait_until(written)
    assert run_id in [r["id"] for r in hub_server.http.get("/api/agent-runs").json()]
    exported = hub_server.http.get(f"/api/agent-runs/{run_id}/sft.jsonl")
    assert exported.status_code == 200
    assert [json.loads(line)["run"] for line in exported.text.splitlines()] == [run_id]


def failing(ask: Ask) -> Turn:
    said = ask.body["messages"][-1]["content"]
    if said == "rate":
        return Turn(status=429, headers={"retry-after": "3"})
    if said == "broken":
        return Turn(status=500)
    if said == "garbage":
        return Turn(raw=b"\x00not json at all")
    return Turn(text="fine")


def test_the_model_server_s_failures_reach_the_harness_and_are_recorded(hub_server: Envhub, endpoint: str) -> None:
    model = ScriptedModel(failing)
    try:
        preset(hub_server, model.url)
        started = start_run(hub_server, endpoint)
        url, auth = started["model_url"] + "/chat/completions", {"authorization": f"Bearer {started['credential']}"}

        def say(text: str, stream: bool = False) -> httpx.Response:
            body = {"model": "m", "messages": [{"role": "user", "content": text}], "stream": stream}
            return httpx.post(url, json=body, headers=auth)

        rate = say("rate")
        assert rate.status_code == 429 and rate.headers["retry-after"] == "3"
        assert say("broken").status_code == 500
        for stream in (False, True):
            garbage = say("garbage", stream)
            assert (garbage.status_code, garbage.json()["error"]["code"]) == (502, "model_garbage")
        assert say("fine").status_code == 200
        huge = httpx.post(url, content=b'{"messages": "' + b"x" * (33 * 2**20) + b'"}', headers=auth)
        assert (huge.status_code, huge.json()["error"]["code"]) == (413, "payload_too_large")
        shown = record(hub_server, started["run"]["id"], 6)
        assert [(c["status"], c["code"]) for c in shown["calls"]] == [
            (429, ""),
            (500, ""),
            (502, "model_garbage"),
            (502, "model_garbage"),
            (200, ""),
            (413, "payload_too_large"),
        ]
        assert shown["calls"][0]["response"]["error"]["type"] == "rate_limit_error"
        assert shown["calls"][4]["text"] == "fine" and shown["run"]["status"] == "running"
    finally:
        model.close()


def test_an_unreachable_model_server_is_502_model_unreachable(hub_server: Envhub, endpoint: str) -> None:
    preset(hub_server, f"http://127.0.0.1:{free_port()}")
    started = start_run(hub_server, endpoint)
    answer = httpx.post(
        started["model_url"] + "/chat/completions",
        json={"model": "m", "messages": MESSAGES},
        headers={"authorization": f"Bearer {started['credential']}"},
    )
    assert (answer.status_code, answer.json()["error"]["code"]) == (502, "model_unreachable")
    assert KEY not in answer.text
    calls = record(hub_server, started["run"]["id"], 1)["calls"]
    assert [(c["status"], c["code"]) for c in calls] == [(502, "model_unreachable")]
