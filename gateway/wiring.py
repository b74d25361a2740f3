"""The gateway's wiring: the little it needs of the rest of envhub, as Protocols the control plane implements, and
the one object the app hands the data plane (`Gateway`).

The gateway asks the control plane for an endpoint's pool (never waiting on a database on its event loop), tells
it when a replica failed to answer or said what it holds, and asks who a bearer is. Everything else it needs is
its own: pools, the relay, the traffic counters, the path rules.
"""

from dataclasses import dataclass, field
from typing import Protocol

import httpx

from core.callers import Access, Caller
from gateway.pools import Pool
from gateway.slots import Slot
from gateway.timers import LOOP_TIMERS, Timers
from gateway.traffic import TrafficCounters

__all__ = ["Bearers", "ControlPlane", "Down", "Gateway", "GatewaySettings"]


@dataclass(frozen=True)
class Down:
    """Why the gateway reaches no pool: the endpoint is not running (reason), or there is no such endpoint (None).
    `ended`: it stopped or failed, for good (its URL will not serve again), rather than starting or stopping."""

    reason: str | None
    ended: bool = False


class ControlPlane(Protocol):
    """Where endpoints run (hosting.pool_cache.PoolCache)."""

    async def pool(self, endpoint_id: str) -> Pool | Down:
        """The endpoint's pool, or why there is none; never a database read on the caller's event loop."""
        ...

    def check_soon(self, endpoint_id: str) -> None:
        """A replica of the endpoint failed to answer: find out whether it died."""
        ...

    async def note_capacity(self, slot: Slot) -> None:
        """A replica said how many sessions it holds: keep it with the replica."""
        ...

    def pools(self) -> list[Pool]:
        """Every pool as last read."""
        ...


class Bearers(Protocol):
    """Who holds a token (app.auth's identities, and the endpoints' own tokens), and the rule they are let in by."""

    prefix: str  # what an endpoint's own token starts with
    access: Access  # who may use a private endpoint, as every door of envhub decides it

    def opens(self, endpoint_id: str, token: str) -> bool:
        """Whether the token is the endpoint's own."""
        ...

    async def who(self, token: str) -> Caller:
        """The admin or the Hub user the token belongs to; EnvhubError (401, 503) when it cannot be told."""
        ...


@dataclass(frozen=True)
class GatewaySettings:
    """The gateway's knobs (ENVHUB_* settings of the same names)."""

    pool_queue_s: float = 60
    ws_ping_s: float = 20
    ws_idle_s: float = 300  # a /ws session quiet this long gives its slot to a session waiting for one
    header_timeout_s: float = 10
    max_head_bytes: int = 64 * 1024
    body_timeout_s: float = 30
    max_body_bytes: int = 32 * 1024 * 1024
    allowed_hosts: frozenset[str] = frozenset()  # hosts of origins whose pages may open sessions, besides envhub's
    behind_proxy: bool = False  # on a Space: a client's address is the last the Hub's proxy forwarded
    sandbox_pages: bool = False  # with sign-in on, environments' pages get an origin of their own


@dataclass
class Gateway:
    """The data plane, as the app builds it once and envhub's server and routes hand it on."""

    routes: ControlPlane
    bearers: Bearers
    traffic: TrafficCounters
    settings: GatewaySettings = field(default_factory=GatewaySettings)
    http: httpx.AsyncClient | None = None  # made when envhub starts serving
    timers: Timers = LOOP_TIMERS  # what its WebSocket sessions' pings and idleness are timed by
