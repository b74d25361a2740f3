"""Placing one session on a replica of its endpoint's pool, for every door: `/ws`, OpenEnv's own MCP sessions made
over HTTP, and the standard MCP door.

A session waits in the pool's queue (ENVHUB_POOL_QUEUE_S in all, however many replicas refuse it), counted against
its client; a replica that refuses it at capacity says what it holds (kept by the control plane) and the session
moves to another, unseen by its client; one that does not answer is looked at (`check_soon`) and another is tried
while one may answer. A client that leaves while it waits holds no slot. Only the gateway's port is used.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from gateway.pools import Pool
from gateway.slots import PoolFull, Slot, Waiter
from gateway.traffic import Traffic
from gateway.wiring import Gateway

__all__ = ["Placement", "Refused", "Unreachable"]

T = TypeVar("T")


class Refused(Exception):
    """The replica's server refused the session at capacity, saying how many it holds (if it did)."""

    def __init__(self, max_sessions: int | None) -> None:
        super().__init__(f"refused at capacity ({max_sessions})")
        self.max_sessions = max_sessions


class Unreachable(Exception):
    """The replica did not answer; `retry`: another replica may be tried (the session did not reach this one)."""

    def __init__(self, why: str, *, retry: bool = True) -> None:
        super().__init__(why)
        self.why, self.retry = why, retry


class Placement:
    """One session's place in an endpoint's pool: the slots it takes and gives back, and whom it counts against.
    It is load that may grow the pool once it is active (its client asked for work), not for having opened."""

    def __init__(
        self, gateway: Gateway, pool: Pool, client: str, *, active: bool = False, presses: bool = False
    ) -> None:
        self.gateway, self.pool = gateway, pool
        self.endpoint_id = pool.endpoint_id
        self.client = client  # user:<name>, else address:<ip> (gateway.gate.client_of)
        self.active = active  # its slot counts as load
        # `presses`: while it waits it may grow the pool, though its slot is no load yet (an MCP session made over
        # HTTP is load once it asks for work: Pool.work)
        self.waiter = Waiter(client, active or presses)
        self.traffic: Traffic = gateway.traffic.of(pool.endpoint_id)

    @property
    def replicas(self) -> int:
        """How many replicas take sessions now."""
        return self.pool.load()[2]

    async def place(
        self, gone: "asyncio.Future[None]", attempt: Callable[[Slot], Awaitable[T]], avoid: frozenset[str] = frozenset()
    ) -> tuple[Slot, T] | None:
        """A slot and what `attempt` made of it there, moving on while `attempt` raises Refused or Unreachable; None
        when the client left first (`gone`). PoolFull when no slot freed in time; Unreachable when no replica
        answered. The slot is the caller's to give back, unless `attempt` raised: then it is given back here."""
        avoided = set(avoid)
        deadline = time.monotonic() + self.gateway.settings.pool_queue_s
        while True:
            try:
                left = max(0.0, deadline - time.monotonic())
                slot = await acquire_unless_gone(self.pool, left, avoided, gone, self.waiter)
            except PoolFull as full:
                full.waited_s = self.gateway.settings.pool_queue_s  # its whole wait, over every replica that refused
                raise
            if slot is None:
                return None
            if self.active:
                self.pool.activate(slot)
            try:
                return slot, await attempt(slot)
            except Refused as refused:
                await self.refused(slot, refused.max_sessions)
                avoided.add(slot.id)
            except Unreachable as unreachable:
                self.unreachable(slot)
                if not unreachable.retry or slot.id in avoided or len(avoided) + 1 >= self.replicas:
                    raise
                avoided.add(slot.id)  # another replica may answer
            except BaseException:
                self.release(slot)
                raise

    def accepted(self, slot: Slot) -> None:
        """The server took the session."""
        self.pool.accepted(slot)

    def activate(self, slot: Slot | None, *, nudge: bool = True) -> None:
        """The session's client asked for work: its slot (if it holds one now) is load that may grow the pool, and
        so is it while it waits for one (`nudge`: whoever scales the pool looks again)."""
        if self.active:
            return
        self.active = self.waiter.active = True
        if slot is not None:
            self.pool.activate(slot)
        elif nudge:
            self.pool.nudge()

    async def refused(self, slot: Slot, max_sessions: int | None) -> None:
        """The server refused the session at capacity: its slot is given back and what it holds is kept."""
        self.pool.refused(slot, max_sessions, active=self.active, client=self.client)
        if slot.said:
            await self.gateway.routes.note_capacity(slot)

    def unreachable(self, slot: Slot, *, held: bool = True) -> None:
        """The replica did not answer: the slot is given back (when the session held it) and the replica looked at."""
        if held:
            self.release(slot)
        self.traffic.request(failed=True)
        self.gateway.routes.check_soon(self.endpoint_id)

    def release(self, slot: Slot) -> None:
        """The session ended on the slot: it is free."""
        self.pool.release(slot, active=self.active, client=self.client)

    def watch_loss(self, slot: Slot, tell: Callable[[str], None]) -> Callable[[], None]:
        """Be told (from any thread) when the replica is lost; the returned function stops that."""
        return self.pool.watch_loss(slot, tell)


async def acquire_unless_gone(
    pool: Pool, queue_s: float, avoid: set[str], gone: "asyncio.Future[None]", waiter: Waiter
) -> Slot | None:
    """A slot for the session, waiting for one as long as the pool lets it wait; None if its client leaves first
    (`gone` settles), its place in the queue given up at once."""
    acquiring: asyncio.Future[Slot] = asyncio.ensure_future(pool.acquire(queue_s, frozenset(avoid), waiter))
    waited: list[asyncio.Future[Any]] = [acquiring, gone]
    await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
    if acquiring.done():
        return acquiring.result()
    acquiring.cancel()
    try:
        slot = await acquiring
    except (asyncio.CancelledError, PoolFull):
        return None
    pool.release(slot, client=waiter.client)
    return None
