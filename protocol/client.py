"""openenv's own client, opened by envhub's outbound session: the playground's WebSocket session on an environment.

Why a subclass reaching into openenv's client: it opens its socket by host name, and
offers no way to open it otherwise. envhub must connect to the address its guard checked
when the tab connected (so a DNS answer that changes later reaches nothing new), with the
URL's own Host header and TLS name: `_connect_async`, the one place openenv opens the
socket, is replaced by one that asks the outbound session for it. Everything else (the
frames, timeouts, the send-and-receive discipline) stays openenv's. It also keeps the
last error frame whole, whose field errors explain a refusal better than its message.

An episode lives on the socket that carried its reset. openenv's client opens a new socket
for the next message when that one has closed, which would send a step to a new session
(on another replica, say) as if nothing happened; here a step or state query after the
episode's socket is gone fails with ConnectionError, saying so, and only a reset opens anew.
"""

import asyncio
from typing import Any

from openenv.core.generic_client import GenericEnvClient
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from core.outbound import OutboundSession

__all__ = ["PinnedClient"]


class PinnedClient(GenericEnvClient):  # type: ignore[misc]
    last_error: dict[str, Any] | None = None
    _episode_ws: ClientConnection | None = None  # the socket that carried the episode's reset
    _ws: ClientConnection | None
    _ws_loop: asyncio.AbstractEventLoop | None

    def __init__(self, base_url: str, outbound: OutboundSession, **options: Any) -> None:
        super().__init__(base_url=base_url, **options)
        self._outbound = outbound

    async def _connect_async(self) -> "PinnedClient":
        # openenv's own connect, minus what a client without a provider never needs.
        if self._ws is not None:
            if self._ws.state not in (State.CLOSING, State.CLOSED) and self._ws_loop is asyncio.get_running_loop():
                return self
            self._ws, self._ws_loop = None, None
        await self._drain_pending_close_tasks()
        try:
            self._ws = await self._outbound.websocket(
                self._ws_url,
                open_timeout_s=self._connect_timeout,
                max_size=self._max_message_size,
                ping_interval=self._websocket_ping_interval_s,
                ping_timeout=self._websocket_ping_timeout_s,
                close_timeout=10,
                compression="deflate",
            )
            self._ws_loop = asyncio.get_running_loop()
        except Exception as e:
            await self.close()
            raise ConnectionError(f"Failed to connect to {self._ws_url}: {e}") from e
        return self

    async def _receive(self) -> dict[str, Any]:
        response: dict[str, Any] = await super()._receive()
        if response.get("type") == "error":
            data = response.get("data")
            self.last_error = data if isinstance(data, dict) else {"message": str(data)}
        return response

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        episode = self._episode_ws
        gone = episode is not None and (self._ws is not episode or episode.state in (State.CLOSING, State.CLOSED))
        if gone and message.get("type") != "reset":
            raise ConnectionError(_lost(episode))
        try:
            response: dict[str, Any] = await super()._send_and_receive(message)
        except ConnectionClosed as exc:
            raise ConnectionError(_lost(self._ws or episode)) from exc
        if message.get("type") == "reset":
            self._episode_ws = self._ws
        return response


def _lost(ws: ClientConnection | None) -> str:
    said = f" ({ws.close_code} {ws.close_reason})".replace(" )", ")") if ws is not None and ws.close_code else ""
    return f"the environment's session was lost{said}: its episode is over, reset to start a new one"
