"""A model as a policy: any OpenAI-compatible chat-completions server (vLLM, TGI, SGLang, llama.cpp,
Ollama, Hugging Face Inference Providers' router), called through the outbound guard.

Every request goes to the address the guard checked, redirects are followed only where the guard allows
(a refused one is named, and nothing is sent there), and a reply is read up to a size limit; the answer
is read with huggingface_hub's chat-completion types. The API key is held as a `SecretStr` and goes out
only as the bearer token to the model server's own origin, never across a redirect to another. A 429 is
retried after its `Retry-After` and a 5xx once, both bounded; anything else is a `ModelError` that ends
the episode with its message, never the run.
"""

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from huggingface_hub import ChatCompletionOutput
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from core.errors import RefusedURLError
from core.outbound import Fetched, OutboundGuard, OutboundSession
from rollout.harness import (
    HARNESS_VERSION,
    Brief,
    InvalidReply,
    feedback_text,
    observation_content,
    read_action,
    read_tool_call,
    system_prompt,
)
from rollout.players import Move, Player

__all__ = ["ModelConfig", "ModelError", "ModelPolicy"]

MAX_RETRY_AFTER_S = 10.0
RATE_LIMIT_RETRIES = 2
_UNREACHABLE = "model_unreachable"  # refused, reset, not HTTP, or a redirect the guard refused
_HINTS = {
    401: "check the API key",
    403: "check the API key's permissions",
    404: "check the base URL and the model name",
    429: "it is rate-limiting: lower the concurrency",
}
HISTORY_MESSAGES = 24  # the most recent turns the model sees, besides the system prompt
MAX_REPLY_BYTES = 4 * 2**20  # a chat completion of 32k tokens is a few hundred KiB


class ModelConfig(BaseModel):
    """A model to evaluate: where it is served, its name, its key and how to sample."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(description="the OpenAI-compatible server's base URL, e.g. http://127.0.0.1:8000/v1")
    model: str = Field(min_length=1, max_length=200)
    api_key: SecretStr | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=512, ge=1, le=32_768)
    seed: int | None = Field(default=None, ge=-(2**63), lt=2**63)
    timeout_s: float = Field(default=60, gt=0, le=600)
    system_prompt: str | None = Field(default=None, max_length=20_000, description="instead of the harness's own")
    token_ids: bool = Field(default=False, description="the server returns token ids and log-probs when asked (vLLM)")

    @field_validator("base_url")
    @classmethod
    def _http(cls, base_url: str) -> str:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"the model's base_url must be an http(s) URL, not {base_url!r}")
        return base_url

    def described(self) -> dict[str, Any]:
        """The run's record of the model: everything but the key."""
        return {
            "kind": "model",
            "base_url": self.base_url,
            "model": self.model,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "harness": HARNESS_VERSION,
            "custom_prompt": self.system_prompt is not None,
        }


class ModelError(Exception):
    """The model server failed a request; the message says how and what to do, the code which way it failed
    (model_timeout, model_unreachable, model_http_error with the server's HTTP status, model_reply_unreadable), for
    callers to tell apart."""

    def __init__(self, message: str, *, code: str, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


def chat_url(base_url: str) -> str:
    """Where a base URL's chat completions are: `<base>/chat/completions` after a `/v1`, else
    `<base>/v1/chat/completions`, unless the URL already names them."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path += "/chat/completions" if path.endswith("/v1") else "/v1/chat/completions"
    return urlunsplit(parts._replace(path=path))


def _retry_after(reply: Fetched) -> float:
    value = reply.headers.get("retry-after")
    try:
        return min(max(float(value), 0.0), MAX_RETRY_AFTER_S) if value else 1.0
    except ValueError:
        return 1.0


def _detail(reply: Fetched) -> str:
    """The error message in a model server's JSON answer, if it gave one."""
    try:
        body = json.loads(reply.body)
    except ValueError:
        return ""
    message = body.get("error", body.get("message")) if isinstance(body, dict) else None
    if isinstance(message, dict):
        message = message.get("message")
    return str(message or "")[:300]


def _completion(reply: Fetched) -> ChatCompletionOutput:
    """The chat completion a 2xx answer holds; ValueError when it holds none."""
    if reply.cut:
        raise ValueError(f"the answer is over {MAX_REPLY_BYTES // 2**20} MiB")
    body = json.loads(reply.body)
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not all(
        isinstance(c, dict) and isinstance(c.get("message"), dict) for c in choices
    ):
        raise ValueError("the answer is not a chat completion (no choices with a message)")
    return ChatCompletionOutput.parse_obj_as_instance(body)


@dataclass
class _ModelPlayer:
    policy: "ModelPolicy"
    brief: Brief
    seed: int | None
    messages: list[dict[str, Any]] = field(default_factory=list)
    tool_call_id: str | None = None  # the call the next observation answers

    def __post_init__(self) -> None:
        self.messages = [{"role": "system", "content": system_prompt(self.brief)}]

    def _window(self) -> list[dict[str, Any]]:
        """The system prompt and the recent turns, starting at a user message (never at a tool answer). Older turns
        are dropped: the model never sees them again, and a long episode would hold them all."""
        del self.messages[1:-HISTORY_MESSAGES]
        recent = self.messages[1:]
        while recent and recent[0]["role"] != "user":
            recent = recent[1:]
        return [self.messages[0], *recent]

    async def act(self, observation: Any, reward: Any) -> Move:
        content = observation_content(observation, reward)
        if self.tool_call_id is not None:  # the observation is the tool's answer
            self.messages.append({"role": "tool", "tool_call_id": self.tool_call_id, "content": content[0]["text"]})
            if len(content) > 1:
                self.messages.append({"role": "user", "content": content})
            self.tool_call_id = None
        else:
            self.messages.append({"role": "user", "content": content})
        return await self._move(observation)

    async def retry(self, problem: str) -> Move:
        if self.tool_call_id is not None:
            self.messages.append({"role": "tool", "tool_call_id": self.tool_call_id, "content": feedback_text(problem)})
            self.tool_call_id = None
        else:
            self.messages.append({"role": "user", "content": feedback_text(problem)})
        return await self._move(None)

    async def _move(self, observation: Any) -> Move:
        started = time.perf_counter()
        output = await self.policy.complete(self._window(), self.brief, self.seed)
        model_ms = (time.perf_counter() - started) * 1000
        usage = getattr(output, "usage", None)
        tokens = int(getattr(usage, "total_tokens", 0) or 0) if usage is not None else 0
        message = output.choices[0].message if output.choices else None
        text = (message.content if message is not None else None) or ""
        calls = (message.tool_calls if message is not None else None) or []
        if calls:
            call = calls[0]
            self.tool_call_id = call.id or "call-0"
            raw_arguments = call.function.arguments
            arguments = raw_arguments if isinstance(raw_arguments, str) else json.dumps(raw_arguments)
            self.messages.append(
                {
                    "role": "assistant",
                    "content": text or None,
                    "tool_calls": [
                        {
                            "id": self.tool_call_id,
                            "type": "function",
                            "function": {"name": call.function.name, "arguments": arguments},
                        }
                    ],
                }
            )
            reply = json.dumps({"tool": call.function.name, "arguments": raw_arguments}, default=str)
            try:
                action = read_tool_call(call.function.name, raw_arguments, self.brief)
            except InvalidReply as exc:
                return Move(None, reply=reply, problem=str(exc), tokens=tokens, model_ms=model_ms)
            return Move(action, reply=reply, tokens=tokens, model_ms=model_ms)
        self.messages.append({"role": "assistant", "content": text[:8_000]})
        if self.brief.uses_tools:
            known = ", ".join(t.name for t in self.brief.tools)
            return Move(None, reply=text, problem=f"call one of the tools ({known})", tokens=tokens, model_ms=model_ms)
        try:
            action = read_action(text, self.brief, observation)
        except InvalidReply as exc:
            return Move(None, reply=text[:8_000], problem=str(exc), tokens=tokens, model_ms=model_ms)
        return Move(action, reply=text[:8_000], tokens=tokens, model_ms=model_ms)


class ModelPolicy:
    """A model served over chat completions; one outbound session (hosts pinned once) for all of a run's episodes."""

    kind = "model"

    def __init__(self, config: ModelConfig, guard: OutboundGuard) -> None:
        self.config = config
        self._url = chat_url(config.base_url)
        key = config.api_key.get_secret_value() if config.api_key is not None else None
        self._outbound = OutboundSession(
            guard,
            timeout_s=config.timeout_s,
            max_bytes=MAX_REPLY_BYTES,
            credentials={self._url: {"authorization": f"Bearer {key}"}} if key else {},
        )

    @property
    def label(self) -> str:
        return self.config.model

    def described(self) -> dict[str, Any]:
        return self.config.described()

    def player(self, brief: Brief, seed: int | None) -> Player:
        if self.config.system_prompt:
            brief = Brief(brief.name, brief.readme, brief.action_schema, brief.tools, self.config.system_prompt)
        return _ModelPlayer(self, brief, seed if self.config.seed is None else self.config.seed)

    def _payload(self, messages: list[dict[str, Any]], brief: Brief, seed: int | None) -> dict[str, Any]:
        config = self.config
        payload = {
            "model": config.model,
            "messages": messages,
            "max_tokens": config.max_tokens,
            "temperature": config.temperature,
            "top_p": config.top_p,
            "seed": seed,
            "tools": brief.chat_tools() if brief.uses_tools else None,
            "stream": False,
        }
        return {name: value for name, value in payload.items() if value is not None}

    async def complete(self, messages: list[dict[str, Any]], brief: Brief, seed: int | None) -> ChatCompletionOutput:
        """One chat completion; a 429 retried after its Retry-After and a 5xx once, both bounded; any other
        failure a ModelError."""
        where = self.config.base_url
        payload = self._payload(messages, brief, seed)
        rate_limited = server_errors = 0
        while True:
            try:
                reply = await self._outbound.fetch("POST", self._url, json=payload)
            except TimeoutError as exc:
                late = f"the model server at {where} did not answer in {self.config.timeout_s:g} s"
                raise ModelError(late, code="model_timeout") from exc
            except RefusedURLError as exc:  # a redirect the guard refused: nothing went there
                refused = f"could not use the model server at {where}: {exc.message}"
                raise ModelError(refused, code=_UNREACHABLE) from exc
            except (httpx.TransportError, OSError) as exc:  # refused, reset, not HTTP
                message = f"could not use the model server at {where}: {type(exc).__name__}: {exc}"
                raise ModelError(message, code=_UNREACHABLE) from exc
            status = reply.status
            if status == 429 and rate_limited < RATE_LIMIT_RETRIES:
                rate_limited += 1
                await asyncio.sleep(_retry_after(reply))
                continue
            if status >= 500 and server_errors < 1:
                server_errors += 1
                await asyncio.sleep(0.5)
                continue
            if not 200 <= status < 300:
                detail = _detail(reply)
                raise ModelError(
                    f"the model server at {where} answered HTTP {status}"
                    + (f": {detail}" if detail else "")
                    + f" ({_HINTS.get(status, 'see its message')})",
                    code="model_http_error",
                    status=status,
                )
            try:
                return _completion(reply)
            except ValueError as exc:
                unreadable = f"could not use the model server at {where}: {exc}"
                raise ModelError(unreadable, code="model_reply_unreadable") from exc

    async def aclose(self) -> None:
        await self._outbound.aclose()
