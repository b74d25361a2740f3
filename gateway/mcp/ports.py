"""What the MCP door needs from the rest of envhub, as small Protocols the control plane implements: a place in
the endpoint's pool for each session, the environment's card, and somewhere to keep the episodes sessions play."""

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Card", "Counters", "EpisodeRecord", "Placement", "PoolFull", "Recorder", "Seat", "SessionRecord"]


@dataclass(frozen=True)
class Seat:
    """A slot on one replica, held by one MCP session: where its server is, and the pool's own handle of it."""

    replica: str
    url: str  # the server's base URL (http or https)
    headers: Mapping[str, str]  # what reaching it takes (a backend's credentials)
    handle: object = field(compare=False, repr=False)


class PoolFull(Exception):
    """Every slot stayed taken while the session waited, or the session could not even wait."""

    def __init__(self, message: str, sessions: int, capacity: int, limit: str | None = None) -> None:
        super().__init__(message)
        self.message, self.sessions, self.capacity = message, sessions, capacity
        self.limit = limit  # the limit that refused it (the pool's own: None), for clients to tell


class Counters(Protocol):
    """The endpoint's traffic counters (they also keep an endpoint in use from being stopped as idle)."""

    def session_opened(self) -> None: ...

    def session_closed(self) -> None: ...

    def step(self, seconds: float, failed: bool = False) -> None: ...


class Placement(Protocol):
    """An endpoint's pool as the door takes sessions from it: the same slots, queue and capacity as for /ws."""

    endpoint_id: str
    client: str  # whom the session counts against: user:<name>, else address:<ip> (gateway.gate.client_of)

    @property
    def traffic(self) -> Counters:
        """The endpoint's counters."""

    @property
    def replicas(self) -> int:
        """How many replicas take sessions now."""

    async def take(self, avoid: frozenset[str], gone: "asyncio.Future[None]") -> Seat | None:
        """A slot, waiting for one as /ws sessions do; None when the client left first; PoolFull when none freed."""

    def accepted(self, seat: Seat) -> None:
        """The server took the session."""

    def activate(self, seat: Seat) -> None:
        """The session's client asked for work: it is load that may grow the pool (it was not, since it opened)."""

    async def refused(self, seat: Seat, max_sessions: int | None) -> None:
        """The server refused the session at capacity; it says what it holds."""

    def unreachable(self, seat: Seat) -> None:
        """The server did not answer: its slot is given back and its replica looked at."""

    def release(self, seat: Seat) -> None:
        """The session ended: its slot is free."""

    def watch_loss(self, seat: Seat, tell: Callable[[str], None]) -> Callable[[], None]:
        """Be told (from any thread) when the replica is lost; the returned function stops that."""


@dataclass(frozen=True)
class Card:
    """What the catalog says of the endpoint's environment."""

    environment: str
    revision: str | None = None
    title: str = ""
    readme: str = ""
    datasets: tuple[str, ...] = ()  # linked datasets whose rows can reset an episode


@dataclass(frozen=True)
class SessionRecord:
    """An agent session as it is recorded: one MCP session on one endpoint."""

    id: str  # the record's id (never the Mcp-Session-Id, which is the session's credential)
    endpoint: str
    environment: str
    revision: str | None
    client: str  # the MCP client that initialized it, as it named itself
    protocol_version: str
    user: str | None  # who its bearer proved to be, if anyone
    tools: tuple[str, ...]
    holder: str = ""  # whose recording budget its episodes count against: the placement's client


@dataclass(frozen=True)
class EpisodeRecord:
    """One episode of an agent session, as far as it went: what the store keeps of it."""

    session: str
    index: int
    seed: int | None
    task: dict[str, Any] | None
    status: str  # done, cut (the session ended or reset first) or running
    error: str | None
    reward: float
    final_reward: float | None
    success: bool | None
    steps: int
    invalid: int
    wall_s: float
    records: list[dict[str, Any]]


class Recorder(Protocol):
    """What the door asks of envhub's control plane: the environment's card, a dataset's task, and storage."""

    async def card(self, endpoint_id: str) -> Card: ...

    async def dataset_task(self, endpoint_id: str, dataset: str, split: str, index: int) -> dict[str, Any]:
        """The reset options of one row of a linked dataset; ValueError saying why when there are none."""

    async def opened(self, session: SessionRecord) -> None: ...

    async def episode(self, episode: EpisodeRecord) -> None:
        """Keep the episode as it is now (written again as it goes on)."""

    async def closed(self, session_id: str, reason: str) -> None: ...
