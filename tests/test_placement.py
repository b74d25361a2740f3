"""Placing a session on a replica, as every door does (gateway.placement), over fake replicas: waiting in the queue,
moving on from a replica at capacity or one that does not answer, a client that leaves while it waits, release.

No server runs here: each replica is what a test's `attempt` makes of it (it refuses at capacity, does not answer,
or takes the session), and the control plane is a stand-in that keeps what the gateway told it. The live-server
tests (test_pools.py, test_slot_accounting.py, redteam/test_door_slots.py) cover the same doors over the wire.
"""

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from core.callers import ANONYMOUS, Access, Caller
from gateway.placement import Placement, Refused, Unreachable
from gateway.pools import Pool
from gateway.slots import PoolFull, Slot, Upstream
from gateway.traffic import TrafficCounters
from gateway.wiring import Down, Gateway, GatewaySettings


class Told:
    """The control plane as the gateway's port sees it: what it was told of replicas."""

    def __init__(self, pool: Pool) -> None:
        self.the_pool = pool
        self.checks: list[str] = []  # endpoints whose replica did not answer
        self.capacities: list[tuple[str, int]] = []  # replicas that said what they hold

    async def pool(self, endpoint_id: str) -> Pool | Down:
        return self.the_pool

    def check_soon(self, endpoint_id: str) -> None:
        self.checks.append(endpoint_id)

    async def note_capacity(self, slot: Slot) -> None:
        self.capacities.append((slot.id, slot.capacity))

    def pools(self) -> list[Pool]:
        return [self.the_pool]


class NoBearers:
    prefix = "envhub-endpoint-"
    access = Access(sign_in=True, anonymous_launch=False)

    def opens(self, endpoint_id: str, token: str) -> bool:
        return False

    async def who(self, token: str) -> Caller:
        return ANONYMOUS


def setup(*capacities: int | None, queue_s: float = 5) -> tuple[Pool, Told, Gateway]:
    """A pool of replicas r0, r1, ... holding these many sessions each (None: not said yet), and its gateway."""
    pool = Pool("e", most=len(capacities))
    pool.set_replicas({f"r{i}": (Upstream(f"http://r{i}", {}), c, True) for i, c in enumerate(capacities)})
    told = Told(pool)
    gateway = Gateway(told, NoBearers(), TrafficCounters(), GatewaySettings(pool_queue_s=queue_s))
    return pool, told, gateway


def replicas(
    refusing: dict[str, int | None] | None = None, silent: frozenset[str] = frozenset()
) -> Callable[[Slot], Awaitable[str]]:
    """What each replica makes of a session: refused at capacity (saying it holds so many), no answer, or taken."""
    refusing = refusing or {}

    async def attempt(slot: Slot) -> str:
        if slot.id in refusing:
            raise Refused(refusing[slot.id])
        if slot.id in silent:
            raise Unreachable(f"{slot.id} is not answering")
        return slot.id

    return attempt


async def queued(pool: Pool) -> None:
    """Once a session waits in the pool's queue (its wait is a task of its own: a few turns of the loop)."""
    while pool.waiting == 0:
        await asyncio.sleep(0)


def never() -> "asyncio.Future[None]":
    return asyncio.get_running_loop().create_future()


def test_a_session_waits_in_the_queue_for_a_slot_that_frees() -> None:
    pool, _, gateway = setup(1)

    async def scenario() -> str | None:
        first = await Placement(gateway, pool, "address:a").place(never(), replicas())
        assert first is not None
        waiting = asyncio.ensure_future(Placement(gateway, pool, "address:b").place(never(), replicas()))
        await asyncio.wait_for(queued(pool), 2)
        assert pool.waiting == 1 and not waiting.done()
        Placement(gateway, pool, "address:a").release(first[0])
        placed = await asyncio.wait_for(waiting, 2)
        return placed[1] if placed is not None else None

    assert asyncio.run(scenario()) == "r0"
    assert pool.waiting == 0 and pool.load()[0] == 1


def test_a_replica_refusing_at_capacity_says_what_it_holds_and_the_session_moves_to_another() -> None:
    pool, told, gateway = setup(2, 1)  # r0 believed to hold 2: tried first

    async def scenario() -> str | None:
        placed = await Placement(gateway, pool, "address:a").place(never(), replicas(refusing={"r0": 1}))
        return placed[1] if placed is not None else None

    assert asyncio.run(scenario()) == "r1"
    assert told.capacities == [("r0", 1)]  # kept with the replica by the control plane
    assert (pool.slots["r0"].capacity, pool.slots["r0"].said, pool.slots["r0"].sessions) == (1, True, 0)
    assert pool.slots["r1"].sessions == 1


def test_an_unanswering_replica_is_looked_at_and_another_tried() -> None:
    pool, told, gateway = setup(2, 1)

    async def scenario() -> str | None:
        placed = await Placement(gateway, pool, "address:a").place(never(), replicas(silent=frozenset({"r0"})))
        return placed[1] if placed is not None else None

    assert asyncio.run(scenario()) == "r1"
    assert told.checks == ["e"]
    assert gateway.traffic.of("e").errors == 1
    assert (pool.slots["r0"].sessions, pool.slots["r1"].sessions) == (0, 1)


def test_when_no_replica_answers_the_session_is_refused_and_holds_nothing() -> None:
    pool, told, gateway = setup(1, 1)

    async def scenario() -> None:
        await Placement(gateway, pool, "address:a").place(never(), replicas(silent=frozenset({"r0", "r1"})))

    with pytest.raises(Unreachable):
        asyncio.run(scenario())
    assert told.checks == ["e", "e"] and pool.load()[0] == 0


def test_a_client_that_leaves_while_it_waits_holds_no_slot() -> None:
    pool, _, gateway = setup(1)

    async def scenario() -> None:
        first = await Placement(gateway, pool, "address:a").place(never(), replicas())
        assert first is not None
        gone = never()
        waiting = asyncio.ensure_future(Placement(gateway, pool, "address:b").place(gone, replicas()))
        await asyncio.wait_for(queued(pool), 2)
        gone.set_result(None)
        assert await asyncio.wait_for(waiting, 2) is None
        assert pool.waiting == 0
        Placement(gateway, pool, "address:a").release(first[0])

    asyncio.run(scenario())
    assert pool.load()[0] == 0


def test_a_slot_stays_taken_past_the_queue_time_and_the_session_is_refused_with_the_pools_numbers() -> None:
    pool, _, gateway = setup(1, queue_s=0)

    async def scenario() -> None:
        assert await Placement(gateway, pool, "address:a").place(never(), replicas()) is not None
        await Placement(gateway, pool, "address:b").place(never(), replicas())

    with pytest.raises(PoolFull) as full:
        asyncio.run(scenario())
    assert (full.value.sessions, full.value.capacity, full.value.waited_s) == (1, 1, 0)


def test_release_frees_the_slot_and_the_clients_share_and_a_failed_attempt_gives_it_back() -> None:
    pool, _, gateway = setup(1)
    pool.held_per_client = 1

    class DoorFailed(Exception):
        pass

    async def broken(slot: Slot) -> str:
        raise DoorFailed

    async def scenario() -> None:
        placement = Placement(gateway, pool, "address:a", active=True)
        placed = await placement.place(never(), replicas())
        assert placed is not None and pool.slots["r0"].active == 1
        placement.release(placed[0])
        assert pool.load()[0] == 0 and pool.slots["r0"].active == 0
        again = await placement.place(never(), replicas())  # its share is back: it may hold one again
        assert again is not None
        placement.release(again[0])
        with pytest.raises(DoorFailed):
            await placement.place(never(), broken)

    asyncio.run(scenario())
    assert pool.load()[0] == 0
