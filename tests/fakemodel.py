"""A fake OpenAI-compatible chat-completions server on 127.0.0.1, for the model client to talk to.

Each reply is decided by `brain(body)`, a function of the request's JSON body, which returns a
`Reply`: text, tool calls, an HTTP status (429 with Retry-After, 500, 400) or a delay before
answering. The server records every request (headers and body) and the most requests it ever
held at once, so tests can check the bearer token, the messages sent and the concurrency.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from protocol.schemas import example_value

__all__ = ["FakeModel", "Reply", "last_observation"]


@dataclass
class Reply:
    text: str | None = None
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)  # (name, arguments: JSON text or a value)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    error: str = ""
    delay_s: float = 0.0
    tokens: int = 7


def last_observation(body: dict[str, Any]) -> Any:
    """The JSON of the newest observation in the messages (a user or tool message's 'Observation: {...}')."""
    for message in reversed(body.get("messages") or []):
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        if isinstance(content, list):
            text = next((p.get("text", "") for p in content if p.get("type") == "text"), "")
        if "Observation: " in text:
            return json.loads(text.split("Observation: ", 1)[1].removesuffix(" ... (cut)"))
    return None


def schema_in(body: dict[str, Any]) -> dict[str, Any] | None:
    system = body["messages"][0]["content"]
    marker = "validates against this JSON schema:\n"
    if marker not in system:
        return None
    schema: dict[str, Any] = json.loads(system.split(marker, 1)[1].split("\n", 1)[0])
    return schema


def generic_brain(body: dict[str, Any]) -> Reply:
    """A model that always answers with a valid move: the smallest one its schema or tools allow."""
    tools = body.get("tools") or []
    if tools:
        names = [t["function"]["name"] for t in tools]
        chosen = next((t for t in tools if t["function"]["name"] == "submit_answer"), tools[0])
        arguments = example_value(chosen["function"]["parameters"])
        assert names, names
        return Reply(text=None, tool_calls=[(chosen["function"]["name"], arguments)])
    schema = schema_in(body)
    return Reply(text=f"My move:\n```json\n{json.dumps(example_value(schema))}\n```")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # a client that gave up (a timeout test) leaves a broken pipe: nothing to report


class FakeModel:
    def __init__(self, brain: Callable[[dict[str, Any]], Reply]) -> None:
        self.brain = brain
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as model servers do: a client reuses its connections

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in two writes: without this, the second waits for a delayed ACK.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                with fake._lock:
                    fake.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                    fake.in_flight += 1
                    fake.most_in_flight = max(fake.most_in_flight, fake.in_flight)
                try:
                    reply = fake.brain(body)
                    if reply.delay_s:
                        time.sleep(reply.delay_s)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1
                if reply.status != 200:
                    self._send(reply.status, {"error": {"message": reply.error or "scripted failure"}}, reply.headers)
                    return
                self._send(200, fake.completion(body, reply))

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @staticmethod
    def completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call-{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
                }
                for i, (name, args) in enumerate(reply.tool_calls)
            ]
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}
            ],
            "usage": {"prompt_tokens": reply.tokens - 2, "completion_tokens": 2, "total_tokens": reply.tokens},
        }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
