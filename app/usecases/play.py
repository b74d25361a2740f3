"""Playground sessions: one openenv client per browser tab, never shared, closed when the
tab goes away or after an idle timeout.

Each session holds one WebSocket session on the environment (through envhub's gateway or
a Space's host), driven by envhub's protocol client (envclient.ws) on the server's event loop, and
opened through the tab's outbound session: to the address the guard checked when the tab
connected, never to whatever the host name resolves to later.
"""

import asyncio
import logging
import secrets
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from app.usecases.play_episode import Episode, Outcome
from core.outbound import OutboundSession
from envclient.interface import Interface
from envclient.ws import PinnedClient, SessionError

log = logging.getLogger(__name__)

IDLE_TIMEOUT_S = 15 * 60
CONNECT_TIMEOUT_S = 10.0
MESSAGE_TIMEOUT_S = 60.0


class PlayError(Exception):
    """The environment refused a message or could not be reached; the message says why."""

    def __init__(self, message: str, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors or []


def _explain(error: dict[str, Any] | None, fallback: Exception) -> PlayError:
    if not error:
        return PlayError(str(fallback) or type(fallback).__name__)
    details = [e for e in error.get("errors") or [] if isinstance(e, dict)]
    message = str(error.get("message") or "the environment refused the message")
    code = error.get("code")
    if details:
        message = "; ".join(_describe(e) for e in details)
    return PlayError(f"{message} ({code})" if code else message, details)


def _describe(error: dict[str, Any]) -> str:
    where = ".".join(str(p) for p in error.get("loc") or ())
    return f"{where}: {error.get('msg', 'invalid')}" if where else str(error.get("msg", "invalid"))


@dataclass
class PlaySession:
    key: str
    environment: str
    url: str
    info: Interface
    outbound: OutboundSession
    address: str = ""  # where the socket connects, when not url (envhub's own gateway on its own address)
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    episode: Episode = field(init=False)
    last_used: float = field(default_factory=time.monotonic)
    legal_actions: list[Any] = field(default_factory=list)  # as the last observation listed them
    model: Any = None  # the policy playing this session, when one does (app.ui.autoplay)
    form: Any = None  # the action form the tab shows, which says how its boards are played (app.ui.direct)
    _client: PinnedClient | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        self.episode = Episode(self.environment, self.url)

    async def _call(self, what: str, send: Any) -> tuple[Outcome, float]:
        async with self._lock:
            self.last_used = time.monotonic()
            if self._client is None:
                self._client = PinnedClient(
                    self.address or self.url,
                    self.outbound,
                    connect_timeout_s=CONNECT_TIMEOUT_S,
                    message_timeout_s=MESSAGE_TIMEOUT_S,
                )
            client = self._client
            client.last_error = None
            started = time.perf_counter()
            try:
                result = await send(client)
            except (SessionError, OSError) as exc:
                error = client.last_error
                if error is None:
                    await self._drop_client()  # the socket is gone; the next call reconnects
                    raise PlayError(f"{what} failed: {exc}") from exc
                raise _explain(error, exc) from exc
            finally:
                self.last_used = time.monotonic()
            elapsed_ms = (time.perf_counter() - started) * 1000
        observation = result.observation if isinstance(result.observation, dict) else {"value": result.observation}
        return Outcome(observation, result.reward, bool(result.done), result.metadata), elapsed_ms

    async def reset(self, options: dict[str, Any]) -> Outcome:
        outcome, elapsed_ms = await self._call("reset", lambda c: c.reset(**options))
        self.episode.reset(options, outcome, elapsed_ms)
        return outcome

    async def step(self, action: dict[str, Any]) -> Outcome:
        outcome, elapsed_ms = await self._call("step", lambda c: c.step(action))
        self.episode.step(action, outcome, elapsed_ms)
        return outcome

    async def _drop_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await asyncio.wait_for(client.close(), timeout=5)
            except Exception as exc:  # closing a broken socket must not hide the real error
                log.debug("closing a play session's client failed: %s", exc)

    async def close(self) -> None:
        async with self._lock:
            if self.model is not None:
                await self.model.aclose()
                self.model = None
            await self._drop_client()
            await self.outbound.aclose()


class PlaySessions:
    """Every open playground session of this server, by browser tab."""

    def __init__(self, idle_timeout_s: float = IDLE_TIMEOUT_S) -> None:
        self.idle_timeout_s = idle_timeout_s
        self._sessions: dict[str, PlaySession] = {}
        self._connecting: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def __len__(self) -> int:
        return len(self._sessions)

    def find(self, key: str | None) -> PlaySession | None:
        session = self._sessions.get(key) if key else None
        if session is not None:
            session.last_used = time.monotonic()
        return session

    def connecting(self, key: str | None) -> asyncio.Lock:
        """The lock a tab's connects take in turn, so that each sees the session the one before it opened (kept
        while a connect holds or awaits it)."""
        lock = self._connecting.get(key or "")
        if lock is None:
            lock = self._connecting[key or ""] = asyncio.Lock()
        return lock

    def find_by_token(self, token: str) -> PlaySession | None:
        return next((s for s in self._sessions.values() if secrets.compare_digest(s.token, token)), None)

    async def open(
        self, key: str, environment: str, url: str, info: Interface, outbound: OutboundSession, address: str = ""
    ) -> PlaySession:
        """A new session for this tab, connecting through `outbound`, which it then owns, to `address`
        (by default `url`, which the episode records). The tab's previous session is closed."""
        await self.close(key)
        session = PlaySession(
            key=key,
            environment=environment,
            url=url.rstrip("/"),
            info=info,
            outbound=outbound,
            address=address.rstrip("/"),
        )
        self._sessions[key] = session
        return session

    async def close(self, key: str | None) -> None:
        session = self._sessions.pop(key, None) if key else None
        if session is not None:
            await session.close()

    async def reap(self) -> int:
        """Close the sessions idle for longer than the timeout; returns how many."""
        deadline = time.monotonic() - self.idle_timeout_s
        idle = [key for key, s in self._sessions.items() if s.last_used < deadline and not s._lock.locked()]
        for key in idle:
            await self.close(key)
        return len(idle)

    async def close_all(self) -> None:
        for key in list(self._sessions):
            await self.close(key)
