"""envhub's own sessions on an endpoint's replicas (a quality report's, reached at the replica's own URL): counted in
the pool as a client's are, taken only from slots nobody waits for, and given back as soon as a client's session
waits, so the endpoint's clients never wait on envhub, let alone are refused for it.

A seat is held while one such session is open. When a client's session starts to wait, every task holding a seat is
cancelled, its sessions closed on the way out, and the seat raises SlotsInUseError: the work stops and runs another
time.
"""

import asyncio
import time
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

from core.errors import SlotsInUseError
from gateway.slots import Slot

__all__ = ["Lender", "LendingPool"]

SPARE_WAIT_S = 5.0  # how long envhub's own work waits for a free slot before it gives way


class LendingPool(Protocol):
    """What a lender asks of the pool that makes it (gateway.pools.Pool)."""

    endpoint_id: str

    @property
    def waiting(self) -> int: ...

    def take_spare(self, replica_id: str, own: int) -> Slot | None: ...

    def accepted(self, slot: Slot) -> None: ...

    def release(self, slot: Slot) -> None: ...


@dataclass(eq=False)
class _Seat:
    slot: Slot
    task: "asyncio.Task[object]"
    loop: asyncio.AbstractEventLoop
    recalled: bool = field(default=False)


class Lender:
    """An endpoint's pool as envhub's own work takes slots from it."""

    def __init__(self, pool: LendingPool) -> None:
        self._pool = weakref.ref(pool)  # the pool owns its lender, not the other way round
        self.endpoint_id = pool.endpoint_id
        self._seats: set[_Seat] = set()

    @property
    def pool(self) -> LendingPool | None:
        return self._pool()

    @asynccontextmanager
    async def seat(self, replica_id: str) -> AsyncIterator[Callable[[], None]]:
        """A slot on the replica for one session, held until the block ends; it yields what to call once the server
        has answered the session (it took it: a server that never said what it holds may then be tried with more).
        SlotsInUseError when no slot is free or a client's session waits, at once or later."""
        pool = self.pool
        own = sum(1 for seat in self._seats if seat.slot.id == replica_id)
        slot = await _spare(pool, replica_id, own) if pool is not None else None
        if pool is None or slot is None:
            raise SlotsInUseError(self._busy(f"replica {replica_id} has no slot nobody waits for"))
        task = asyncio.current_task()
        assert task is not None, "a seat is taken by a task"
        seat = _Seat(slot, task, asyncio.get_running_loop())
        self._seats.add(seat)
        try:
            yield lambda: pool.accepted(slot)
        except asyncio.CancelledError:
            if seat.recalled:
                for held in self._seats:  # the task's other seats see this error, not the cancellation
                    held.recalled = held.recalled and held.task is not task
                if task.uncancel() == 0:
                    raise SlotsInUseError(self._busy("a client's session waited for a slot")) from None
            raise
        finally:
            self._seats.discard(seat)
            pool.release(slot)

    def recall(self) -> None:
        """A client's session waits: every task holding a seat stops (from any thread)."""
        for seat in list(self._seats):
            seat.loop.call_soon_threadsafe(self._stop, seat.task)

    def _stop(self, task: "asyncio.Task[object]") -> None:
        # On the task's loop, where seats are taken and given back: only a task that still holds one is cancelled,
        # and once however many it holds.
        held = [seat for seat in self._seats if seat.task is task]
        if held and not any(seat.recalled for seat in held):
            for seat in held:
                seat.recalled = True
            task.cancel()

    def _busy(self, why: str) -> str:
        return (
            f"envhub's own sessions on endpoint {self.endpoint_id} gave way to its clients ({why}); "
            "run it again when they leave a slot free"
        )


async def _spare(pool: LendingPool, replica_id: str, own: int) -> Slot | None:
    """A free slot on the replica, waiting a few seconds for one: a session that just closed gives its slot back a
    moment later (its server's close is answered first). Never while a client's session waits."""
    deadline = time.monotonic() + SPARE_WAIT_S
    while (slot := pool.take_spare(replica_id, own)) is None and not pool.waiting and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return slot
