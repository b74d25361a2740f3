"""What a tool call returns through the door, whatever answered it: the observation as text, `structuredContent`
with reward, done and the observation, and every image the observation holds as image content.

Images (base64 PNG, JPEG, GIF or WebP, raw or as data URIs) are lifted out of the observation: the text and the
structured copy name them instead of repeating their bytes, so a model reads each one once, as an image.
"""

import json
from typing import Any

from mcp.types import CallToolResult, ContentBlock, ImageContent, TextContent

from protocol.observations import image_data_uri

__all__ = ["ENVELOPE", "error_result", "observation_result", "rpc_tool_result", "text_of", "tool_observation_result"]

# The outputSchema of every tool the door lists: what its structuredContent is.
ENVELOPE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reward": {"type": ["number", "null"], "description": "the reward of this step, when it has one"},
        "done": {"type": "boolean", "description": "whether the episode is over"},
        "observation": {"type": "object", "description": "what the environment answered"},
    },
    "required": ["reward", "done", "observation"],
}
_MAX_WALK = 16  # how deep images are looked for


def _lift(value: Any, images: list[ImageContent], depth: int = 0) -> Any:
    """The value with its images replaced by a mention of them, each appended to `images`."""
    if isinstance(value, str):
        uri = image_data_uri(value) if len(value) >= 32 else None
        if uri is None:
            return value
        mime, _, data = uri.removeprefix("data:").partition(";base64,")
        images.append(ImageContent(type="image", data=data, mimeType=mime))
        return f"<image {len(images)}: {mime}, in this result's image content>"
    if depth >= _MAX_WALK:
        return value
    if isinstance(value, dict):
        return {k: _lift(v, images, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_lift(v, images, depth + 1) for v in value]
    return value


def _text(observation: Any, reward: Any, done: bool, note: str) -> str:
    shown = json.dumps(observation, ensure_ascii=False, default=str)
    return f"{shown}\n\nreward: {json.dumps(reward)} · done: {json.dumps(done)}" + (f"\n{note}" if note else "")


def observation_result(data: dict[str, Any], *, over_note: str = "", is_error: bool = False) -> CallToolResult:
    """A reset's or a step's answer (an observation frame's data: observation, reward, done, metadata)."""
    observation = data.get("observation")
    observation = observation if isinstance(observation, dict) else {"value": observation}
    metadata = data.get("metadata")
    if isinstance(metadata, dict) and metadata and "metadata" not in observation:
        observation = {**observation, "metadata": metadata}
    reward, done = data.get("reward"), bool(data.get("done"))
    images: list[ImageContent] = []
    shown = _lift(observation, images)
    content: list[ContentBlock] = [TextContent(type="text", text=_text(shown, reward, done, over_note if done else ""))]
    return CallToolResult(
        content=[*content, *images],
        structuredContent={"reward": _reward(reward), "done": done, "observation": shown},
        isError=is_error,
    )


def tool_observation_result(data: dict[str, Any]) -> CallToolResult:
    """An MCP environment's answer to a tool call sent as a step (a CallToolObservation): the tool's own content,
    and the step's reward and done."""
    observation = data.get("observation")
    observation = observation if isinstance(observation, dict) else {}
    result = observation.get("result")
    error = observation.get("error")
    content = _content_of(result)
    is_error = isinstance(error, dict) or (isinstance(result, dict) and bool(result.get("is_error", False)))
    if isinstance(error, dict) and error.get("message"):
        content.append(TextContent(type="text", text=str(error["message"])))
    images: list[ImageContent] = []
    shown = _lift(observation, images)
    metadata = data.get("metadata")
    if isinstance(metadata, dict) and metadata and "metadata" not in shown:
        shown = {**shown, "metadata": metadata}
    if not content:
        content = [TextContent(type="text", text=_text(shown, data.get("reward"), bool(data.get("done")), ""))]
    return CallToolResult(
        content=[*content, *images],
        structuredContent={"reward": _reward(data.get("reward")), "done": bool(data.get("done")), "observation": shown},
        isError=is_error,
    )


def rpc_tool_result(result: dict[str, Any]) -> CallToolResult:
    """An MCP environment's tools/call result over JSON-RPC (no step: no reward, and the episode goes on)."""
    content = _content_of(result)
    images: list[ImageContent] = []
    shown = _lift(result, images)
    if not content:
        content = [TextContent(type="text", text=_text(shown, None, False, ""))]
    is_error = bool(result.get("isError", result.get("is_error", False)))
    return CallToolResult(
        content=[*content, *images],
        structuredContent={"reward": None, "done": False, "observation": shown},
        isError=is_error,
    )


def error_result(message: str, *, done: bool = False, observation: dict[str, Any] | None = None) -> CallToolResult:
    """A call the environment (or the door) refused: the model reads why, as MCP tool errors go."""
    return CallToolResult(
        content=[TextContent(type="text", text=message)],
        structuredContent={"reward": None, "done": done, "observation": observation or {"error": message}},
        isError=True,
    )


def _reward(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    return float(value) if isinstance(value, int | float) else None


def _content_of(result: Any) -> list[ContentBlock]:
    """The content items of a FastMCP result, as the MCP types have them (text and images; others as text)."""
    items = result.get("content") if isinstance(result, dict) else None
    content: list[ContentBlock] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "text" and isinstance(item.get("text"), str):
            content.append(TextContent(type="text", text=item["text"]))
        elif item.get("type") == "image" and isinstance(item.get("data"), str):
            mime = item.get("mimeType") or item.get("mime_type") or "image/png"
            content.append(ImageContent(type="image", data=item["data"], mimeType=str(mime)))
        else:
            content.append(TextContent(type="text", text=json.dumps(item, ensure_ascii=False, default=str)))
    return content


def text_of(result: CallToolResult, limit: int = 500) -> str:
    """A result's text content, its first `limit` characters."""
    text = " ".join(c.text for c in result.content if isinstance(c, TextContent))
    return (text if len(text) <= limit else text[: limit - 1] + "…") or "the tool failed"
