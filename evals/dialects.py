"""A model call in any of the model door's dialects (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages)
read into one conversation: the system prompt, OpenAI chat messages, JSON-schema function tools and the answer.

What a harness sends is read as leniently as it is written: a part this module does not know is kept as text and
named in `unread`, never dropped silently and never raised on; thinking and reasoning items are left out (they are
not the model's answer, and a harness sends them back only to keep a server's cache)."""

import json
from dataclasses import dataclass, field
from typing import Any

from evals.models import ModelCallBase

__all__ = ["Conversation", "conversation", "tool_name"]

Message = dict[str, Any]
DROPPED = frozenset({"thinking", "redacted_thinking", "reasoning"})


@dataclass
class Conversation:
    """One model call as a chat: `messages` without the system prompt, and `answer` (None when the call failed)."""

    system: str | None = None
    messages: list[Message] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    answer: Message | None = None
    unread: list[str] = field(default_factory=list)

    def chat(self) -> list[Message]:
        """System prompt, messages and answer, as one list of OpenAI chat messages."""
        head = [{"role": "system", "content": self.system}] if self.system is not None else []
        return head + self.messages + ([self.answer] if self.answer is not None else [])

    def keep(self, where: str, value: Any) -> str:
        """An item not understood, as text, noted in `unread`."""
        self.unread.append(f"{where}: {_kind(value)}")
        return value if isinstance(value, str) else _dumps(value)


def conversation(call: ModelCallBase) -> Conversation:
    """The call's request and answer in one shape, whatever its dialect."""
    into = Conversation()
    body = call.request if isinstance(call.request, dict) else {}
    readers = {"chat": (_chat_request, _chat_answer), "responses": (_responses_request, _responses_answer)}
    readers["messages"] = (_messages_request, _messages_answer)
    request, answer = readers.get(call.dialect, (None, None))
    if request is None or answer is None:
        into.keep("dialect", call.dialect)
        into.messages.append({"role": "user", "content": _dumps(body)})
        return into
    request(body, into)
    if 200 <= call.status < 300:
        read = answer(call.response, into) if isinstance(call.response, dict) else None
        calls = [_call(c.get("id"), c.get("name"), c.get("arguments")) for c in call.tool_calls if isinstance(c, dict)]
        into.answer = read or _assistant(call.text, calls)
    return into


def tool_name(name: Any, namespace: Any = None) -> str:
    """A tool's name as the model wrote it. Codex groups MCP tools in a namespace `mcp__server__` and its model calls
    one as the namespace followed by the tool's name: `mcp__server__tool`, the name Claude Code and Qwen Code use."""
    plain = str(name or "")
    if not isinstance(namespace, str) or not namespace:
        return plain
    return namespace + plain if namespace.endswith("__") else f"{namespace}__{plain}"


# -- shared pieces


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _kind(value: Any) -> str:
    return str(value.get("type") or value.get("role") or "object") if isinstance(value, dict) else type(value).__name__


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else _dumps(value if value is not None else {})


def _call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    function = {"name": str(name or ""), "arguments": _arguments(arguments)}
    return {"id": str(call_id or ""), "type": "function", "function": function}


def _assistant(text: str, calls: list[dict[str, Any]]) -> Message:
    message: Message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return message


def _tool(call_id: Any, content: str) -> Message:
    return {"role": "tool", "tool_call_id": str(call_id or ""), "content": content}


def _function(name: Any, description: Any, parameters: Any) -> dict[str, Any]:
    schema = parameters if isinstance(parameters, dict) else {"type": "object", "properties": {}}
    function = {"name": str(name or ""), "description": str(description or ""), "parameters": schema}
    return {"type": "function", "function": function}


def _text(content: Any, into: Conversation, where: str) -> str:
    """Text parts joined; a part of another kind (an image, a file) kept as its JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return into.keep(where, content)
    pieces = []
    for part in content:
        if isinstance(part, str):
            pieces.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            pieces.append(part["text"])  # text, input_text, output_text; cache_control does not matter here
        elif not (isinstance(part, dict) and part.get("type") in DROPPED):
            pieces.append(into.keep(where, part))
    return "".join(pieces)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# -- OpenAI Chat Completions: already the shape, but content may come as parts


def _chat_request(body: dict[str, Any], into: Conversation) -> None:
    systems = []
    for message in _list(body.get("messages")):
        if not isinstance(message, dict):
            into.messages.append({"role": "user", "content": into.keep("messages", message)})
            continue
        role = message.get("role")
        content = _text(message.get("content"), into, f"{role} message")
        if role in ("system", "developer"):
            systems.append(content)
        elif role == "assistant":
            calls = [_chat_call(c, into) for c in _list(message.get("tool_calls"))]
            into.messages.append(_assistant(content, calls))
        elif role == "tool":
            into.messages.append(_tool(message.get("tool_call_id"), content))
        elif role == "user":
            into.messages.append({"role": "user", "content": content})
        else:
            into.messages.append({"role": "user", "content": into.keep("messages", message)})
    into.system = "\n\n".join(systems) if systems else None
    for tool in _list(body.get("tools")):
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict):
            into.tools.append(_function(function.get("name"), function.get("description"), function.get("parameters")))
        else:
            into.keep("tools", tool)


def _chat_call(call: Any, into: Conversation) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return _call("", "", into.keep("tool_calls", call))
    return _call(call.get("id"), function.get("name"), function.get("arguments"))


def _chat_answer(response: dict[str, Any], into: Conversation) -> Message | None:
    choices = _list(response.get("choices"))
    message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
    if not isinstance(message, dict):
        return None
    calls = [_chat_call(c, into) for c in _list(message.get("tool_calls"))]
    return _assistant(_text(message.get("content"), into, "answer"), calls)


# -- Anthropic Messages: content blocks


def _messages_request(body: dict[str, Any], into: Conversation) -> None:
    system = body.get("system")
    into.system = _text(system, into, "system") if system is not None else None
    for message in _list(body.get("messages")):
        if not isinstance(message, dict):
            into.messages.append({"role": "user", "content": into.keep("messages", message)})
            continue
        blocks = message.get("content")
        blocks = [{"type": "text", "text": blocks}] if isinstance(blocks, str) else _list(blocks)
        if message.get("role") == "assistant":
            into.messages.append(_blocks_answer(blocks, into))
            continue
        texts: list[str] = []
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                content = _text(block.get("content"), into, "tool_result")
                into.messages.append(_tool(block.get("tool_use_id"), content))
            else:
                texts.append(_text([block], into, "user message"))
        if texts:
            into.messages.append({"role": "user", "content": "\n\n".join(t for t in texts if t) or ""})
    for tool in _list(body.get("tools")):
        if isinstance(tool, dict) and "input_schema" in tool:
            into.tools.append(_function(tool.get("name"), tool.get("description"), tool.get("input_schema")))
        else:
            into.keep("tools", tool)  # a server tool (web search...): the model never calls it as a function


def _blocks_answer(blocks: list[Any], into: Conversation) -> Message:
    texts, calls = [], []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            calls.append(_call(block.get("id"), block.get("name"), block.get("input")))
        else:
            texts.append(_text([block], into, "assistant message"))
    return _assistant("".join(texts), calls)


def _messages_answer(response: dict[str, Any], into: Conversation) -> Message | None:
    blocks = response.get("content")
    return _blocks_answer(blocks, into) if isinstance(blocks, list) else None


# -- OpenAI Responses: input items


def _responses_request(body: dict[str, Any], into: Conversation) -> None:
    systems = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
    items = body.get("input")
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else _list(items):
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if not isinstance(item, dict):
            into.messages.append({"role": "user", "content": into.keep("input", item)})
        elif kind == "message" and item.get("role") in ("system", "developer"):
            systems.append(_text(item.get("content"), into, "system"))
        elif kind == "message" and item.get("role") in ("user", "assistant"):
            content = _text(item.get("content"), into, f"{item['role']} message")
            _append(into.messages, {"role": item["role"], "content": content})
        elif kind == "function_call":
            call = _call(item.get("call_id"), tool_name(item.get("name"), item.get("namespace")), item.get("arguments"))
            _append(into.messages, _assistant("", [call]))
        elif kind == "function_call_output":
            content = _text(item.get("output"), into, "function_call_output")
            into.messages.append(_tool(item.get("call_id"), content))
        elif kind not in DROPPED:
            into.messages.append({"role": "user", "content": into.keep("input", item)})
    into.system = "\n\n".join(systems) if systems else None
    for tool in _list(body.get("tools")):
        if isinstance(tool, dict) and tool.get("type") == "function":
            into.tools.append(_function(tool.get("name"), tool.get("description"), tool.get("parameters")))
        elif isinstance(tool, dict) and tool.get("type") == "namespace":
            for inner in _list(tool.get("tools")):
                if isinstance(inner, dict) and inner.get("type", "function") == "function":
                    name = tool_name(inner.get("name"), tool.get("name"))
                    into.tools.append(_function(name, inner.get("description"), inner.get("parameters")))
                else:
                    into.keep("tools", inner)
        else:
            into.keep("tools", tool)


def _append(messages: list[Message], message: Message) -> None:
    """An assistant's text and its function calls come as separate items: they are one chat message."""
    last = messages[-1] if messages else None
    if message["role"] == "assistant" and last is not None and last["role"] == "assistant":
        last["content"] = (last["content"] or "") + (message["content"] or "")
        if message.get("tool_calls"):
            last["tool_calls"] = [*last.get("tool_calls", []), *message["tool_calls"]]
        return
    messages.append(message)


def _responses_answer(response: dict[str, Any], into: Conversation) -> Message | None:
    output = response.get("output")
    if not isinstance(output, list):
        return None
    answer = _assistant("", [])
    for item in output:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message" and isinstance(item, dict):
            answer["content"] += _text(item.get("content"), into, "answer")
        elif kind == "function_call" and isinstance(item, dict):
            call = _call(item.get("call_id"), tool_name(item.get("name"), item.get("namespace")), item.get("arguments"))
            answer["tool_calls"] = [*answer.get("tool_calls", []), call]
        elif kind not in DROPPED:
            answer["content"] += into.keep("answer", item)
    return answer
