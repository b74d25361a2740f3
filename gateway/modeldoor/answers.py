"""Each dialect's answers as the door reads them: a streamed answer's events assembled into the non-streamed shape,
what a call's record keeps of an answer, and the dialect's own error shape."""

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Assembly", "Events", "Summary", "error_body", "is_answer", "summary"]

CHAT, RESPONSES, MESSAGES = "chat", "responses", "messages"
_RESPONSE_STATES = {f"response.{s}" for s in ("created", "in_progress", "completed", "incomplete", "failed")}


def error_body(dialect: str, status: int, code: str, message: str) -> dict[str, Any]:
    """The error as the dialect's clients read one (OpenAI's or Anthropic's), with envhub's code beside."""
    kind = {401: "authentication_error", 404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error"}
    kind_of = kind.get(status, "invalid_request_error" if status < 500 else "api_error")
    if dialect == MESSAGES:
        return {"type": "error", "error": {"type": kind_of, "message": message, "code": code}}
    return {"error": {"message": message, "type": kind_of, "code": code}}


def is_answer(dialect: str, answer: Any) -> bool:
    """Whether a non-streamed body is the dialect's answer at all."""
    key = {CHAT: "choices", RESPONSES: "output", MESSAGES: "content"}[dialect]
    return isinstance(answer, dict) and isinstance(answer.get(key), list)


@dataclass
class Summary:
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = None


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def summary(dialect: str, answer: dict[str, Any]) -> Summary:
    """What a call's record keeps of an answer in the dialect's non-streamed shape."""
    usage: dict[str, Any] = answer["usage"] if isinstance(answer.get("usage"), dict) else {}
    if dialect == CHAT:
        choice = (answer.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        calls = [
            {"id": c.get("id"), "name": c["function"].get("name"), "arguments": c["function"].get("arguments", "")}
            for c in message.get("tool_calls") or []
        ]
        content = (choice.get("logprobs") or {}).get("content")
        text = message.get("content")
        return Summary(
            text if isinstance(text, str) else "",
            calls,
            choice.get("finish_reason"),
            {"input_tokens": _int(usage.get("prompt_tokens")), "output_tokens": _int(usage.get("completion_tokens"))},
            answer.get("prompt_token_ids"),
            choice.get("token_ids"),
            [t.get("logprob") for t in content] if isinstance(content, list) else None,
        )
    tokens = {"input_tokens": _int(usage.get("input_tokens")), "output_tokens": _int(usage.get("output_tokens"))}
    if dialect == RESPONSES:
        items = answer.get("output") or []
        texts = [p.get("text", "") for i in items if i.get("type") == "message" for p in i.get("content") or []]
        calls = [
            {"id": i.get("call_id"), "name": i.get("name"), "arguments": i.get("arguments", "")}
            | ({"namespace": i["namespace"]} if i.get("namespace") else {})
            for i in items
            if i.get("type") == "function_call"
        ]
        reason = (answer.get("incomplete_details") or {}).get("reason") or answer.get("status")
        return Summary("".join(t for t in texts if isinstance(t, str)), calls, reason, tokens)
    blocks = answer.get("content") or []
    return Summary(
        "".join(b.get("text", "") for b in blocks if b.get("type") == "text"),
        [
            {"id": b.get("id"), "name": b.get("name"), "arguments": json.dumps(b.get("input"))}
            for b in blocks
            if b.get("type") == "tool_use"
        ],
        answer.get("stop_reason"),
        tokens,
    )


class Events:
    """Server-sent events parsed from bytes as they arrive: (event name or None, data text) for each whole one."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, data: bytes) -> list[tuple[str | None, str]]:
        self.buffer += data.replace(b"\r\n", b"\n")
        found = []
        while b"\n\n" in self.buffer:
            block, self.buffer = self.buffer.split(b"\n\n", 1)
            name, lines = None, []
            for line in block.decode("utf-8", errors="replace").split("\n"):
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    lines.append(line[5:].removeprefix(" "))
            if lines:
                found.append((name, "\n".join(lines)))
        return found


class Assembly:
    """A streamed answer's events put together into the dialect's non-streamed answer."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self.answer: dict[str, Any] = {}
        self.message: dict[str, Any] = {"role": "assistant", "content": None}
        self.choice: dict[str, Any] = {"index": 0, "message": self.message, "finish_reason": None}
        self.calls: dict[int, dict[str, Any]] = {}
        self.items: dict[int, dict[str, Any]] = {}
        self.blocks: dict[int, dict[str, Any]] = {}

    def feed(self, name: str | None, data: str) -> None:
        """One event; ValueError when it is not the dialect's."""
        if data.strip() == "[DONE]":
            return
        event = json.loads(data)
        if not isinstance(event, dict):
            raise ValueError("an event's data is not a JSON object")
        getattr(self, f"_{self.dialect}")(event.get("type", name), event)

    def _chat(self, _kind: str | None, chunk: dict[str, Any]) -> None:
        for key in ("id", "object", "created", "model", "prompt_token_ids", "usage"):
            if chunk.get(key) is not None:
                self.answer[key] = chunk[key]
        for choice in chunk["choices"]:
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self.message["content"] = (self.message["content"] or "") + delta["content"]
            for part in delta.get("tool_calls") or []:
                call = self.calls.setdefault(
                    part.get("index", 0), {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
                )
                call["id"] = part.get("id") or call["id"]
                function = part.get("function") or {}
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                self.choice["finish_reason"] = choice["finish_reason"]
            if choice.get("token_ids") is not None:
                self.choice["token_ids"] = self.choice.get("token_ids", []) + choice["token_ids"]
            content = (choice.get("logprobs") or {}).get("content")
            if content:
                self.choice.setdefault("logprobs", {"content": []})["content"] += content

    def _responses(self, kind: str | None, event: dict[str, Any]) -> None:
        if kind in _RESPONSE_STATES:
            self.answer = event["response"]
        elif kind == "response.output_item.done":
            self.items[event["output_index"]] = event["item"]

    def _messages(self, kind: str | None, event: dict[str, Any]) -> None:
        if kind == "message_start":
            self.answer = dict(event["message"])
        elif kind == "content_block_start":
            self.blocks[event["index"]] = dict(event["content_block"])
        elif kind == "content_block_delta":
            block, delta = self.blocks[event["index"]], event["delta"]
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta.get("type") == "input_json_delta":
                block["partial_json"] = block.get("partial_json", "") + delta["partial_json"]
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
        elif kind == "content_block_stop":
            block = self.blocks[event["index"]]
            if "partial_json" in block:
                block["input"] = json.loads(block.pop("partial_json") or "{}")
        elif kind == "message_delta":
            self.answer.update(event.get("delta") or {})
            self.answer["usage"] = {**(self.answer.get("usage") or {}), **(event.get("usage") or {})}

    def result(self) -> dict[str, Any]:
        """The answer so far, in the dialect's non-streamed shape."""
        if self.dialect == CHAT:
            if self.calls:
                self.message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
            return {**self.answer, "object": "chat.completion", "choices": [self.choice]}
        if self.dialect == RESPONSES:
            if not self.answer.get("output") and self.items:
                return {**self.answer, "output": [self.items[i] for i in sorted(self.items)]}
            return self.answer
        return {**self.answer, "content": [self.blocks[i] for i in sorted(self.blocks)]}
