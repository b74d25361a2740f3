"""The model policy against a real local chat-completions server that scripts its replies."""

import asyncio
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from core.outbound import OutboundGuard
from protocol.tools import Tool
from rollout.harness import Brief
from rollout.model import ModelConfig, ModelError, ModelPolicy
from tests.fakemodel import FakeModel, Reply

GUESS = {"type": "object", "properties": {"guess": {"type": "string"}}, "required": ["guess"]}
BRIEF = Brief("wordle", "", GUESS)


@pytest.fixture
def scripted() -> Iterator[tuple[FakeModel, list[Reply]]]:
    replies: list[Reply] = []
    fake = FakeModel(lambda body: replies.pop(0) if replies else Reply(text='{"guess": "crane"}'))
    yield fake, replies
    fake.close()


def move(config: ModelConfig, brief: Brief = BRIEF, observation: Any = None) -> Any:
    async def go() -> Any:
        policy = ModelPolicy(config, OutboundGuard(allow_private=True))
        try:
            return await policy.player(brief, 3).act(observation or {"board": ""}, None)
        finally:
            await policy.aclose()

    return asyncio.run(go())


def test_a_reply_becomes_an_action_and_the_key_goes_as_a_bearer_token(scripted: tuple[FakeModel, list[Reply]]) -> None:
    fake, replies = scripted
    replies.append(Reply(text='I guess ```json\n{"guess": "slate"}\n```', tokens=42))
    config = ModelConfig(base_url=fake.url, model="m", api_key="sk-test-secret", temperature=0.2, seed=None)
    result = move(config)
    assert result.action == {"guess": "slate"} and result.tokens == 42 and result.problem is None
    headers, body = fake.requests[0]
    assert headers["authorization"] == "Bearer sk-test-secret"
    assert body["model"] == "m" and body["temperature"] == 0.2 and body["seed"] == 3
    assert body["messages"][0]["role"] == "system" and body["messages"][1]["role"] == "user"
    assert "sk-test-secret" not in repr(config) and "sk-test-secret" not in str(config.described())


def test_a_429_waits_for_retry_after_and_a_500_is_tried_again(scripted: tuple[FakeModel, list[Reply]]) -> None:
    fake, replies = scripted
    replies += [Reply(status=429, headers={"Retry-After": "1"}), Reply(status=500)]
    started = time.monotonic()
    result = move(ModelConfig(base_url=fake.url, model="m"))
    assert result.action == {"guess": "crane"}
    assert len(fake.requests) == 3
    assert time.monotonic() - started >= 1.0


@pytest.mark.parametrize("status", [400, 401, 404])
def test_failures_say_what_failed_and_what_to_do(scripted: tuple[FakeModel, list[Reply]], status: int) -> None:
    fake, replies = scripted
    replies.append(Reply(status=status, error="This model's maximum context length is 4096 tokens"))
    with pytest.raises(ModelError) as failed:
        move(ModelConfig(base_url=fake.url, model="m"))
    assert (failed.value.code, failed.value.status) == ("model_http_error", status)
    assert "This model's maximum context length is 4096 tokens" in str(failed.value)  # the server's own words


def test_rate_limits_are_retried_a_bounded_number_of_times(scripted: tuple[FakeModel, list[Reply]]) -> None:
    fake, replies = scripted
    replies += [Reply(status=429, headers={"Retry-After": "0"})] * 5
    with pytest.raises(ModelError) as failed:
        move(ModelConfig(base_url=fake.url, model="m"))
    assert (failed.value.code, failed.value.status) == ("model_http_error", 429)
    assert len(fake.requests) == 3


def test_a_slow_model_times_out(scripted: tuple[FakeModel, list[Reply]]) -> None:
    fake, replies = scripted
    replies.append(Reply(text="{}", delay_s=2))
    with pytest.raises(ModelError) as failed:
        move(ModelConfig(base_url=fake.url, model="m", timeout_s=0.5))
    assert failed.value.code == "model_timeout"


def test_a_model_server_that_is_down_is_named() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ModelError) as failed:
        move(ModelConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m"))
    assert failed.value.code == "model_unreachable"
    assert f"http://127.0.0.1:{port}/v1" in str(failed.value)  # which server it could not reach


def test_garbage_and_unknown_tools_are_problems_for_the_model_not_errors(
    scripted: tuple[FakeModel, list[Reply]],
) -> None:
    fake, replies = scripted
    replies.append(Reply(text="no idea " * 100))
    assert "no JSON object" in (move(ModelConfig(base_url=fake.url, model="m")).problem or "")
    tools = Brief("toolbox", "", None, (Tool("add", "", {"type": "object"}),))
    replies.append(Reply(tool_calls=[("subtract", {})]))
    result = move(ModelConfig(base_url=fake.url, model="m"), tools)
    assert result.action is None and "there is no tool 'subtract'" in (result.problem or "")
    replies.append(Reply(tool_calls=[("add", {"a": 1})]))
    result = move(ModelConfig(base_url=fake.url, model="m"), tools)
    assert result.action == {"type": "call_tool", "tool_name": "add", "arguments": {"a": 1}}
    assert fake.requests[-1][1]["tools"][0]["function"]["name"] == "add"
