"""A scripted model server on 127.0.0.1 speaking OpenAI Chat Completions, the Responses API and Anthropic Messages.

Each answer is decided by `brain(ask) -> Turn` from the request alone (`Ask`: dialect, body, offered tool names,
tool results so far, system text), so a harness's side requests (a title, a background summary) do not throw it
off. Answers come non-streamed or streamed (SSE, each API's own events), always with usage figures. A chat
request with `return_token_ids: true` is answered as vLLM does: `prompt_token_ids`, `choices[].token_ids` and
log-probs whose tokens read `token_id:N`, from a byte tokenizer over a prefix-keeping rendering of the
conversation, so a later call's prompt ids start with an earlier call's prompt + completion ids.
`.url` is `http://127.0.0.1:PORT` (an OpenAI client's base is `url + "/v1"`); `.seen` lists every request.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Ask", "ScriptedModel", "Seen", "Turn", "play", "render_prompt", "token_ids"]

DIALECTS = {"/v1/chat/completions": "chat", "/v1/responses": "responses", "/v1/messages": "messages"}


@dataclass(frozen=True)
class Ask:
    dialect: str  # chat | responses | messages
    body: dict[str, Any]
    tools: list[str]  # offered tool names; a Responses namespace's tools as `NAMESPACE__tool`
    tool_results: list[str]  # texts of the tool results in the conversation so far
    system: str


@dataclass
class Turn:
    text: str | None = None
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (offered name, arguments)
    status: int = 200
    raw: bytes | None = None  # sent as the whole answer instead of a well-formed one
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # before the first byte of the answer


@dataclass(frozen=True)
class Seen:
    path: str
    headers: dict[str, str]  # lower-case names
    body: dict[str, Any]


def play(tool_suffix: str, arguments: list[dict[str, Any]], final: str) -> Callable[[Ask], Turn]:
    """A brain calling the offered tool ending with `tool_suffix` once per arguments, in order, then saying `final`."""

    def brain(ask: Ask) -> Turn:
        tool = next((name for name in ask.tools if name.endswith(tool_suffix)), None)
        if tool is None:
            return Turn(text="A short answer.")
        done = len(ask.tool_results)
        if done < len(arguments):
            return Turn(tool_calls=[(tool, arguments[done])])
        return Turn(text=final)

    return brain


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") or _text_of(p.get("content")) for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return "" if content is None else json.dumps(content)


def _namespaces(body: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Flattened name -> (namespace, name) for the tools a Responses request offers inside a namespace."""
    found: dict[str, tuple[str, str]] = {}
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                found[f"{tool['name']}__{inner['name']}"] = (tool["name"], inner["name"])
    return found


def ask_of(dialect: str, body: dict[str, Any]) -> Ask:
    tools: list[str] = []
    for tool in body.get("tools") or []:
        if dialect == "chat":
            tools.append(tool.get("function", {}).get("name", ""))
        elif tool.get("type") != "namespace":
            tools.append(tool.get("name", ""))
    tools += list(_namespaces(body)) if dialect == "responses" else []
    results: list[str] = []
    system: list[str] = []
    if dialect == "chat":
        for m in body.get("messages") or []:
            if m.get("role") == "tool":
                results.append(_text_of(m.get("content")))
            elif m.get("role") in ("system", "developer"):
                system.append(_text_of(m.get("content")))
    elif dialect == "responses":
        system.append(body.get("instructions") or "")
        items = body.get("input")
        for item in items if isinstance(items, list) else []:
            if item.get("type") == "function_call_output":
                results.append(_text_of(item.get("output")))
            elif item.get("role") in ("system", "developer"):
                system.append(_text_of(item.get("content")))
    else:
        system.append(_text_of(body.get("system")))
        for m in body.get("messages") or []:
            blocks = m.get("content") if isinstance(m.get("content"), list) else []
            results += [_text_of(b.get("content")) for b in blocks if b.get("type") == "tool_result"]
    return Ask(dialect, body, tools, results, "\n".join(s for s in system if s))


# vLLM-like token ids: bytes of a rendering that keeps every earlier message's rendering as a prefix.
def _calls_json(calls: list[tuple[str, str]]) -> str:
    return json.dumps([{"name": name, "arguments": arguments} for name, arguments in calls]) if calls else ""


def _render_message(message: dict[str, Any]) -> str:
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]
    return f"<|{message.get('role')}|>{_text_of(message.get('content'))}{_calls_json(calls)}<|end|>"


def render_prompt(messages: list[dict[str, Any]]) -> str:
    return "".join(_render_message(m) for m in messages) + "<|assistant|>"


def token_ids(text: str) -> list[int]:
    return list(text.encode())


def _logprobs(ids: list[int]) -> dict[str, Any]:
    return {"content": [{"token": f"token_id:{i}", "logprob": -((i % 7) + 1) / 10} for i in ids]}


class _Answer:
    """One turn written out in a dialect: ids, usage, and the non-streamed body or the streamed events."""

    def __init__(self, ask: Ask, turn: Turn) -> None:
        self.ask, self.turn, self.body = ask, turn, ask.body
        self.model = str(self.body.get("model", ""))
        self.text = turn.text or ""
        self.calls = [(name, json.dumps(args)) for name, args in turn.tool_calls]
        prompt = render_prompt(self.body.get("messages") or []) if ask.dialect == "chat" else json.dumps(self.body)
        self.prompt_ids = token_ids(prompt)
        self.completion_ids = token_ids(self.text + _calls_json(self.calls) + "<|end|>")
        self.vllm = ask.dialect == "chat" and bool(self.body.get("return_token_ids"))
        self.logprobs = self.vllm and bool(self.body.get("logprobs"))

    def usage(self) -> dict[str, int]:
        inp, out = len(self.prompt_ids), len(self.completion_ids)
        if self.ask.dialect == "chat":
            return {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out}
        if self.ask.dialect == "responses":
            return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}
        return {"input_tokens": inp, "output_tokens": out}

    def pieces(self) -> list[str]:
        return [self.text[i : i + 8] for i in range(0, len(self.text), 8)]

    # -- chat
    def chat(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.turn.text}
        if self.calls:
            message["tool_calls"] = [
                {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                for i, (n, a) in enumerate(self.calls)
            ]
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": self.finish("tool_calls", "stop")}
        answer: dict[str, Any] = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [choice],
            "usage": self.usage(),
        }
        if self.vllm:
            answer["prompt_token_ids"] = self.prompt_ids
            choice["token_ids"] = self.completion_ids
        if self.logprobs:
            choice["logprobs"] = _logprobs(self.completion_ids)
        return answer

    def chat_events(self) -> Iterator[tuple[str | None, dict[str, Any]]]:
        base = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": int(time.time())}
        base["model"] = self.model

        def chunk(delta: dict[str, Any], ids: list[int], finish: str | None = None) -> dict[str, Any]:
            choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
            if self.vllm:
                choice["token_ids"] = ids
            if self.logprobs:
                choice["logprobs"] = _logprobs(ids)
            return {**base, "choices": [choice]}

        first = chunk({"role": "assistant", "content": ""}, [])
        if self.vllm:
            first["prompt_token_ids"] = self.prompt_ids
        yield None, first
        for piece in self.pieces():
            yield None, chunk({"content": piece}, token_ids(piece))
        calls_ids = token_ids(_calls_json(self.calls))
        for i, (name, arguments) in enumerate(self.calls):
            head = {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": ""}}
            yield None, chunk({"tool_calls": [head]}, calls_ids if i == 0 else [])
            for part in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
                yield None, chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]}, [])
        yield None, chunk({}, token_ids("<|end|>"), self.finish("tool_calls", "stop"))
        yield None, {**base, "choices": [], "usage": self.usage()}

    def finish(self, tool: str, text: str) -> str:
        return tool if self.calls else text

    # -- responses
    def _function_item(self, i: int, name: str, arguments: str) -> dict[str, Any]:
        item = {"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": name}
        namespace = _namespaces(self.body).get(name)
        if namespace:
            item["namespace"], item["name"] = namespace
        return {**item, "arguments": arguments, "status": "completed"}

    def _message_item(self) -> dict[str, Any]:
        part = {"type": "output_text", "text": self.text, "annotations": []}
        return {"type": "message", "id": "msg_0", "status": "completed", "role": "assistant", "content": [part]}

    def responses(self, status: str = "completed") -> dict[str, Any]:
        output = [self._message_item()] if self.turn.text is not None else []
        output += [self._function_item(i, n, a) for i, (n, a) in enumerate(self.calls)]
        return {
            "id": "resp_scripted",
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": self.model,
            "output": output if status == "completed" else [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": self.usage() if status == "completed" else None,
        }

    def responses_events(self) -> Iterator[tuple[str | None, dict[str, Any]]]:
        yield "response.created", {"response": self.responses("in_progress")}
        index = 0
        if self.turn.text is not None:
            item = self._message_item()
            yield "response.output_item.added", {"output_index": 0, "item": {**item, "content": []}}
            part = {"type": "output_text", "text": "", "annotations": []}
            where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
            yield "response.content_part.added", {**where, "part": part}
            for piece in self.pieces():
                yield "response.output_text.delta", {**where, "delta": piece}
            yield "response.output_text.done", {**where, "text": self.text}
            yield "response.content_part.done", {**where, "part": {**part, "text": self.text}}
            yield "response.output_item.done", {"output_index": 0, "item": item}
            index = 1
        for i, (name, arguments) in enumerate(self.calls):
            item = self._function_item(i, name, arguments)
            where = {"item_id": item["id"], "output_index": index + i}
            yield "response.output_item.added", {"output_index": index + i, "item": {**item, "arguments": ""}}
            for part_ in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
                yield "response.function_call_arguments.delta", {**where, "delta": part_}
            yield "response.function_call_arguments.done", {**where, "arguments": arguments}
            yield "response.output_item.done", {"output_index": index + i, "item": item}
        yield "response.completed", {"response": self.responses()}

    # -- messages
    def messages(self) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": self.text}] if self.turn.text is not None else []
        content += [
            {"type": "tool_use", "id": f"toolu_{i}", "name": n, "input": args}
            for i, (n, args) in enumerate(self.turn.tool_calls)
        ]
        return {
            "id": "msg_scripted",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": self.finish("tool_use", "end_turn"),
            "stop_sequence": None,
            "usage": self.usage(),
        }

    def messages_events(self) -> Iterator[tuple[str | None, dict[str, Any]]]:
        usage = self.usage()
        start = {**self.messages(), "content": [], "stop_reason": None}
        yield (
            "message_start",
            {"message": {**start, "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}},
        )
        index = 0
        if self.turn.text is not None:
            yield "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}
            for piece in self.pieces():
                yield "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}}
            yield "content_block_stop", {"index": 0}
            index = 1
        for i, (name, arguments) in enumerate(self.calls):
            block = {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {}}
            yield "content_block_start", {"index": index + i, "content_block": block}
            for part in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
                delta = {"type": "input_json_delta", "partial_json": part}
                yield "content_block_delta", {"index": index + i, "delta": delta}
            yield "content_block_stop", {"index": index + i}
        stop = {"stop_reason": self.finish("tool_use", "end_turn"), "stop_sequence": None}
        yield "message_delta", {"delta": stop, "usage": {"output_tokens": usage["output_tokens"]}}
        yield "message_stop", {}


def _error_body(dialect: str, status: int) -> dict[str, Any]:
    kind = "rate_limit_error" if status == 429 else "api_error"
    if dialect == "messages":
        return {"type": "error", "error": {"type": kind, "message": f"scripted failure {status}"}}
    return {"error": {"message": f"scripted failure {status}", "type": kind, "code": str(status)}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # a client that gave up mid-answer leaves a broken pipe: nothing to report


class ScriptedModel:
    def __init__(self, brain: Callable[[Ask], Turn]) -> None:
        self.brain = brain
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                with scripted._lock:
                    scripted.seen.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                dialect = DIALECTS.get(self.path)
                if dialect is None:
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())
                    return
                ask = ask_of(dialect, body)
                turn = scripted.brain(ask)
                if turn.delay_s:
                    time.sleep(turn.delay_s)
                if turn.raw is not None:
                    self._send(turn.status, turn.raw, turn.headers)
                elif turn.status != 200:
                    self._send(turn.status, json.dumps(_error_body(dialect, turn.status)).encode(), turn.headers)
                elif body.get("stream"):
                    self._stream(_Answer(ask, turn), turn.headers)
                else:
                    answer = _Answer(ask, turn)
                    self._send(200, json.dumps(getattr(answer, dialect)()).encode(), turn.headers)

            def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, answer: _Answer, headers: dict[str, str]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                events: Iterator[tuple[str | None, dict[str, Any]]] = getattr(answer, f"{answer.ask.dialect}_events")()
                for number, (event, data) in enumerate(events):
                    if event is None:
                        self._chunk(f"data: {json.dumps(data)}\n\n".encode())
                        continue
                    # Responses events carry their sequence number; Anthropic's do not.
                    payload = {"type": event, **data}
                    if answer.ask.dialect == "responses":
                        payload["sequence_number"] = number
                    self._chunk(f"event: {event}\ndata: {json.dumps(payload)}\n\n".encode())
                if answer.ask.dialect == "chat":
                    self._chunk(b"data: [DONE]\n\n")
                self._chunk(b"")

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
