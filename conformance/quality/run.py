"""What the checks of one quality report share: the target, its outbound session, the deadline, what the
server says about itself and declares, and the episodes played so far (later checks and the figures read them).

The step budget is the `max_steps` an environment's state reports, else `DEFAULT_MAX_STEPS` (RFC 008 declares
none); the time budget is the manifest's `validation.resources.episode_timeout_s`.
"""

import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

from conformance.context import ServerCapacity
from conformance.engine import Check, Finding, Lane
from conformance.quality.episodes import Episode
from core.errors import SlotsInUseError
from core.outbound import OutboundGuard, OutboundSession
from envclient.health import healthy
from envclient.interface import Interface
from envclient.ws import Lost, PinnedClient, SessionError
from protocol.tools import example_action
from rollout.harness import Brief
from rollout.players import Player, RandomPolicy

__all__ = ["DEFAULT_MAX_STEPS", "NO_ACTION_FIX", "QualityTarget", "ReplicaTarget", "Run", "Seats"]

DEFAULT_MAX_STEPS = 500
ALIVE_TIMEOUT_S = 3.0
DEAD_FIX = "the server stopped answering: read its log for the crash or the hang, fix it, and run the report again"


@dataclass(frozen=True)
class ReplicaTarget:
    """One server of a pool, reached directly (not through the gateway), to compare replicas."""

    id: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)


class Seats(Protocol):
    """Slots of a pool for the report's sessions on its replicas at their own URLs (an envhub endpoint's), each held
    while its session is open and yielding what to call once the server answered it. They raise SlotsInUseError,
    which stops the report, when the pool's clients need them."""

    def seat(self, replica_id: str) -> AbstractAsyncContextManager[Callable[[], None]]: ...


@dataclass(frozen=True)
class QualityTarget:
    """What a report runs against, and what the catalog and hosting know of it."""

    url: str
    environment: str | None = None
    revision: str | None = None
    manifest: dict[str, Any] | None = None
    readme: str | None = None  # the catalog's; the server's own /metadata readme_content otherwise
    replicas: tuple[ReplicaTarget, ...] | None = None  # a pool's ready replicas; None: not known (a bare URL)
    cold_start_s: float | None = None  # from the launch to the first healthy answer, when the caller saw it
    memory: Callable[[], int | None] | None = None  # bytes the servers hold now, where the backend can see it
    server_capacity: ServerCapacity | None = None  # reads what each server of an envhub endpoint's pool holds
    seats: Seats | None = None  # where sessions on the pool's replicas take their slots
    replica: str | None = None  # the replica the URL itself reaches, when it is one (a background round's)


NO_ACTION_FIX = "serve GET /schema with an action schema (openenv's create_app does), or MCP tools"


def episode_timeout_s(manifest: dict[str, Any] | None) -> float | None:
    """The manifest's `validation.resources.episode_timeout_s`, when it is a positive number."""
    validation = (manifest or {}).get("validation")
    resources = validation.get("resources") if isinstance(validation, dict) else None
    value = resources.get("episode_timeout_s") if isinstance(resources, dict) else None
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return float(value) if 0 < value < float("inf") else None


class Run(Lane):
    """One report: the target, the outbound session, the deadline, and what earlier checks learned."""

    def __init__(
        self,
        target: QualityTarget,
        base: str,
        guard: OutboundGuard,
        outbound: OutboundSession,
        *,
        timeout_s: float,
        deadline_s: float,
    ) -> None:
        self.target = target
        self.base = base
        self.guard = guard
        self.outbound = outbound
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + deadline_s
        self.deadline_s = deadline_s
        self.interface = Interface()
        self.brief = Brief(name=base)
        self.episode_timeout_s = episode_timeout_s(target.manifest)
        self.token = uuid.uuid4().hex[:8]
        self.reference: Episode | None = None  # a random-policy episode whose actions the figures replay
        self.state_max_steps: int | None = None  # the budget the environment's state reports
        self.first_reset_s: float | None = None
        self.dead: str | None = None  # why the server is gone: the checks after it are not run

    async def alive(self) -> str | None:
        """None when GET /health answers healthy, else what it got."""
        try:
            fetched = await self.outbound.fetch("GET", self.base + "/health", timeout_s=ALIVE_TIMEOUT_S)
        except Exception as exc:  # refused, reset, timed out: nobody answers
            return f"GET /health failed: {type(exc).__name__} {exc}".strip()
        return None if healthy(fetched) else f"GET /health answered HTTP {fetched.status}, not healthy"

    def before(self, check: Check[Any]) -> Finding | None:
        return None if self.dead is None else Finding.error(f"not run: {self.dead}", DEAD_FIX)

    async def caught(self, check: Check[Any], exc: Exception) -> Finding | None:
        if isinstance(exc, SlotsInUseError):
            raise exc  # not the server's doing: the report stops, and runs another time
        if isinstance(exc, TimeoutError):
            fix = f"make reset and step answer faster: the whole report has {self.deadline_s:g} s"
            return Finding.error("not finished: the report's deadline passed during this check", fix)
        if not isinstance(exc, SessionError):
            return None
        down = await self.alive() if isinstance(exc, Lost) else None
        if down is None:
            return Finding.error(f"the check could not go on: {exc}")
        self.dead = f"the server stopped answering during {check.check_id} ({exc}; {down})"
        return Finding.error(f"the server stopped answering: {exc}; {down}", DEAD_FIX)

    def episode_id(self, label: str) -> str:
        return f"envhub-quality-{self.token}-{label}"

    @property
    def max_steps(self) -> int:
        return self.state_max_steps or DEFAULT_MAX_STEPS

    @property
    def budget_source(self) -> str:
        return "the max_steps its state reports" if self.state_max_steps else "envhub's default: RFC 008 declares none"

    @property
    def no_action(self) -> str | None:
        """Why no action can be built, or None when one can."""
        if example_action(self.brief.action_schema, list(self.brief.tools)) is not None:
            return None
        if self.brief.action_schema is not None:
            return "the action schema of GET /schema describes no object, and the server lists no MCP tools"
        return "GET /schema gave no action schema and the server lists no MCP tools: no action can be built"

    def random(self, seed: int) -> Player:
        """The random baseline of evaluations, seeded."""
        return RandomPolicy.player(self.brief, seed)

    @asynccontextmanager
    async def session(
        self,
        *,
        base: str | None = None,
        outbound: OutboundSession | None = None,
        timeout_s: float = 0,
        replica: str | None = None,
    ) -> AsyncIterator[PinnedClient]:
        """A /ws session (on that replica of the pool, at `base`), its replies bounded by the report's timeout (less
        when given), closed after; it holds a seat of the pool's while it is open when the URL reaches a replica
        directly."""
        on = replica or (self.target.replica if base is None else None)
        seats = self.target.seats
        no_seat: AbstractAsyncContextManager[Callable[[], None]] = nullcontext(lambda: None)
        async with seats.seat(on) if seats is not None and on is not None else no_seat as answered:
            outbound = outbound or self.outbound
            timeout_s = timeout_s or self.timeout_s
            client = PinnedClient(
                base or self.base,
                outbound,
                connect_timeout_s=timeout_s,
                message_timeout_s=timeout_s,
                max_message_bytes=outbound.max_bytes,  # a report's memory stays bounded, whatever a server sends
                on_answered=answered,
            )
            try:
                yield client
            finally:
                await client.close()
