"""What observations carry besides their fields: images (base64 or data URIs), the legal actions they list, the
error that says the environment refused the action, a reward as a number, the environment's own word on success;
and an observation as a record keeps it."""

import base64
import binascii
import hashlib
import json
import re
from typing import Any

__all__ = [
    "LEGAL_ACTION_KEYS",
    "MAX_IMAGE_BYTES",
    "image_data_uri",
    "kept",
    "legal_actions",
    "refusal",
    "reward_number",
    "success",
]

SUCCESS_KEYS = ("success", "solved", "won", "is_success")
LEGAL_ACTION_KEYS = ("legal_actions", "valid_actions", "available_actions", "legal_moves", "valid_moves")
MAX_IMAGE_BYTES = 8 * 1024 * 1024
_MAGIC = {
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"\xff\xd8\xff": "image/jpeg",
    b"GIF87a": "image/gif",
    b"GIF89a": "image/gif",
}
_DATA_URI = re.compile(r"^data:(image/(?:png|jpeg|gif|webp));base64,([A-Za-z0-9+/=\s]+)$", re.IGNORECASE)
_B64 = re.compile(r"^[A-Za-z0-9+/\s]+={0,2}$")
_WHITESPACE = re.compile(r"\s")


def image_data_uri(value: str) -> str | None:
    """A data: URI for a base64 PNG, JPEG, GIF or WebP (raw or already a data URI), else None."""
    if value[:5].lower() == "data:":
        match = _DATA_URI.match(value.strip())
        return f"data:{match.group(1).lower()};base64,{_WHITESPACE.sub('', match.group(2))}" if match else None
    if len(value) < 32 or len(value) > MAX_IMAGE_BYTES * 4 // 3 + 8 or not _B64.match(value[:4096]):
        return None
    try:
        head = base64.b64decode(value[:64], validate=False)
    except (binascii.Error, ValueError):
        return None
    mime = next((m for magic, m in _MAGIC.items() if head.startswith(magic)), None)
    if mime is None and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        mime = "image/webp"
    if mime is None:
        return None
    return f"data:{mime};base64,{_WHITESPACE.sub('', value)}"


def legal_actions(observation: Any) -> list[Any]:
    """The legal actions an observation lists under one of the usual keys; [] when it lists none."""
    if not isinstance(observation, dict):
        return []
    for key in LEGAL_ACTION_KEYS:
        value = observation.get(key)
        if isinstance(value, list):
            return value
    return []


def refusal(observation: Any) -> str | None:
    """Why the environment refused the action it answers, when its observation says so in an `error` field (text,
    or an object with a message); None when it took the action."""
    value = observation.get("error") if isinstance(observation, dict) else None
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, dict) and value.get("message"):
        kind = value.get("error_type") or value.get("type")
        return f"{kind}: {value['message']}" if kind else str(value["message"])
    return None


def reward_number(value: Any) -> float | None:
    """A reward as a number (true and false as 1 and 0), or None when it is not one."""
    if isinstance(value, bool):
        return float(value)
    return float(value) if isinstance(value, int | float) else None


def success(observation: Any) -> bool | None:
    """Whether the environment says the episode succeeded (a success, solved, won or is_success flag), if it does."""
    if isinstance(observation, dict):
        for key in SUCCESS_KEYS:
            if isinstance(observation.get(key), bool):
                return bool(observation[key])
    return None


def kept(observation: Any, limit: int) -> Any:
    """The observation as a record keeps it: whole up to `limit` characters of JSON, else its start and the
    digest of the whole (observations cut alike compare alike)."""
    text = json.dumps(observation, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return observation
    return {
        "cut": f"the observation was {len(text):,} characters; its start is kept",
        "start": text[:4096],
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }
