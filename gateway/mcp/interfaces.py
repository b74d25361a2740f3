"""What the door reads of an endpoint's environment over HTTP, once per endpoint: its action schema and splits.

Each answer is read as it streams, up to `MAX_RESPONSE_BYTES` and `READ_S`: past the size the session is refused
(a server answering that much is misbehaving). A read that failed (no answer, a server error) is not remembered,
so the next session reads again rather than finding the endpoint's door shut until envhub restarts.
"""

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx

from core.outbound import MAX_RESPONSE_BYTES, read_capped
from gateway.jsonbody import read_json
from gateway.mcp.placing import Unavailable

__all__ = ["Interface", "Interfaces"]

_KNOWN_MAX = 1024  # endpoints whose schema and splits are remembered
READ_S = 30.0  # the most one answer may take, whole


@dataclass(frozen=True)
class Interface:
    """What a session's replica says of its environment: its action schema and splits."""

    action_schema: dict[str, Any] | None
    splits: tuple[str, ...]


class _Failed(Exception):
    """An answer that could not be read: not remembered."""


class Interfaces:
    """The endpoints' interfaces as read from their replicas, and the HTTP client that reads them."""

    def __init__(self) -> None:
        self._known: dict[str, Interface] = {}
        self._http: httpx.AsyncClient | None = None

    async def of(self, endpoint_id: str, base: str, headers: dict[str, str]) -> Interface:
        """The endpoint's interface, read from the replica at `base` unless known; Unavailable when an answer is
        over the size the door reads."""
        known = self._known.get(endpoint_id)
        if known is not None:
            return known
        failed = False
        schema = splits = None
        try:
            schema = await self._get(base, "schema", headers)
            names = await self._get(base, "list_environments", headers)
            if isinstance(names, list) and names and isinstance(names[0], str):
                listed = await self._get(base, f"{names[0]}/splits", headers)
                splits = tuple(
                    s if isinstance(s, str) else str(s.get("name"))
                    for s in (listed if isinstance(listed, list) else [])
                    if isinstance(s, str) or (isinstance(s, dict) and s.get("name"))
                )
        except _Failed:
            failed = True
        action = schema.get("action") if isinstance(schema, dict) else None
        interface = Interface(action if isinstance(action, dict) else None, splits or ())
        if not failed:
            if len(self._known) >= _KNOWN_MAX:
                self._known.clear()
            self._known[endpoint_id] = interface
        return interface

    async def _get(self, base: str, path: str, headers: dict[str, str]) -> Any:
        """The answer's JSON; None when the server has none (no such path, not JSON); _Failed when it failed."""
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=httpx.Timeout(READ_S, connect=5))
        try:
            async with (
                asyncio.timeout(READ_S),
                self._http.stream("GET", f"{base.rstrip('/')}/{path}", headers=headers) as response,
            ):
                if response.status_code >= 500:
                    raise _Failed()
                if response.status_code != 200:
                    return None
                body, more = await read_capped(response, MAX_RESPONSE_BYTES)
        except (httpx.HTTPError, TimeoutError) as exc:
            raise _Failed() from exc
        if more:
            raise Unavailable(
                f"its server answered /{path} with over {MAX_RESPONSE_BYTES // 1024} KiB, the most envhub reads "
                "of it; its server is misbehaving"
            )
        try:
            return read_json(body)
        except ValueError:
            return None

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None
