"""Checks on reset options, which openenv's WebSocket route passes to reset() as raw, unvalidated JSON."""

import secrets
import uuid
from collections.abc import Iterable
from typing import Any

MAX_SEED = 2**63 - 1


class InvalidResetOption(ValueError):
    """A reset option that is unknown, of the wrong type or out of range; `code` says which, for programs."""

    def __init__(self, message: str, code: str = "reset_option_invalid") -> None:
        super().__init__(message)
        self.code = code


def bounded_int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidResetOption(f"{name} must be an integer from {low} to {high}, got {value!r}")
    return value


def seed_or_random(seed: object) -> int:
    """The seed to play; a fresh one when none is given, so that every episode can be replayed from its state."""
    return secrets.randbelow(2**31) if seed is None else bounded_int("seed", seed, 0, MAX_SEED)


def episode_id_or_new(episode_id: object) -> str:
    if episode_id is None:
        return str(uuid.uuid4())
    if not isinstance(episode_id, str) or not 0 < len(episode_id) <= 255:
        raise InvalidResetOption(f"episode_id must be a string of 1 to 255 characters, got {episode_id!r}")
    return episode_id


def reject_unknown(unknown: dict[str, Any], known: Iterable[str]) -> None:
    """openenv forwards every key to a reset() that takes **kwargs, so a misspelt option would otherwise pass."""
    if unknown:
        names = ", ".join(sorted(unknown))
        raise InvalidResetOption(
            f"unknown reset option(s) {names}; the options are {', '.join(known)}", "reset_option_unknown"
        )
