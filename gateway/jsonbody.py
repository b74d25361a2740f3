"""JSON read from what came from outside (a client's body, a server's answer), however deep it nests."""

import json
from typing import Any

__all__ = ["TooDeep", "read_json"]


class TooDeep(ValueError):
    """JSON nested deeper than Python's parser goes: it is refused as JSON that is not."""


def read_json(data: bytes | str) -> Any:
    """The JSON document; ValueError when it is none, TooDeep when it nests too deep to read (Python's parser
    recurses, and raises RecursionError, a 500 with a traceback wherever it is not caught, past a depth of about a
    thousand)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise TooDeep("the JSON nests too deep to read; send it flatter") from None
