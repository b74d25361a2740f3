"""The pool as a policy over fake replicas: where each session goes, who waits, what may grow it, what frees a slot.

No server runs here: the slots stand for replicas with the capacities a test gives them, as Ray Serve's router is
tested with fake replicas. The live-server tests (test_pools.py) cover the same rules over the wire.
"""

import asyncio

import pytest

from gateway.pools import Pool
from gateway.slots import PoolFull, QueueFull, Upstream, Waiter


def pool_of(*capacities: int | None, most: int | None = None, queue: int = 512, per_client: int = 128) -> Pool:
    """A pool of replicas r0, r1, ... holding these many sessions each (None: not said yet)."""
    pool = Pool("e", most=most or len(capacities), queue=queue, queue_per_client=per_client)
    pool.set_replicas(
        {f"r{i}": (Upstream(f"http://r{i}", {}), capacity, True) for i, capacity in enumerate(capacities)}
    )
    return pool


def take(pool: Pool, waiter: Waiter | None = None, queue_s: float = 0) -> str:
    return asyncio.run(pool.acquire(queue_s, waiter=waiter)).id


def test_a_session_goes_to_the_replica_with_the_most_free_slots_and_equals_take_turns() -> None:
    pool = pool_of(2, 4)
    placed = [take(pool) for _ in range(4)]
    assert placed[:2] == ["r1", "r1"]  # 4 free against 2
    assert sorted(placed[2:]) == ["r0", "r1"]  # 2 and 2 free: one each
    assert pool.load() == (4, 6, 2)


def test_a_replica_that_has_not_said_what_it_holds_is_tried_before_anyone_waits() -> None:
    pool = pool_of(None)
    assert [take(pool), take(pool)] == ["r0", "r0"]  # believed 1, tried again rather than queued
    slot = pool.slots["r0"]
    pool.refused(slot, 1)  # the second was refused: now it has said
    assert (slot.capacity, slot.said, slot.sessions) == (1, True, 1)
    with pytest.raises(PoolFull):
        take(pool)


def test_a_released_slot_wakes_a_waiting_session() -> None:
    pool = pool_of(1)

    async def scenario() -> str:
        first = await pool.acquire(0)
        waiting = asyncio.ensure_future(pool.acquire(5))
        await asyncio.sleep(0)
        assert pool.waiting == 1 and not waiting.done()
        pool.release(first)
        return (await asyncio.wait_for(waiting, 2)).id

    assert asyncio.run(scenario()) == "r0"
    assert pool.waiting == 0


def test_the_queue_is_bounded_in_all_and_per_client() -> None:
    pool = pool_of(1, queue=3, per_client=2)

    async def refusal(who: str) -> tuple[str, int]:
        with pytest.raises(QueueFull) as full:
            await pool.acquire(5, waiter=Waiter(who))
        return full.value.limit, full.value.waiting

    async def full_queue() -> list[tuple[str, int]]:
        await pool.acquire(0)
        waiting = [asyncio.ensure_future(pool.acquire(5, waiter=Waiter(w))) for w in ("mallory", "mallory", "victim")]
        await asyncio.sleep(0)
        assert pool.waiting == 3
        refused = [await refusal("mallory"), await refusal("someone")]
        for future in waiting:
            future.cancel()
        return refused

    assert asyncio.run(full_queue()) == [("queue_max", 3)] * 2
    pool = pool_of(1, queue=3, per_client=2)

    async def one_client() -> tuple[str, int]:
        await pool.acquire(0)
        waiting = [asyncio.ensure_future(pool.acquire(5, waiter=Waiter("mallory"))) for _ in range(2)]
        await asyncio.sleep(0)
        refused = await refusal("mallory")
        victim = asyncio.ensure_future(pool.acquire(5, waiter=Waiter("victim")))
        await asyncio.sleep(0)
        assert pool.waiting == 3  # someone else still finds room
        for future in (*waiting, victim):
            future.cancel()
        return refused

    assert asyncio.run(one_client()) == ("queue_per_client", 2)


def test_idle_sessions_take_slots_but_never_grow_the_pool() -> None:
    pool = pool_of(1, 1, most=4)

    async def scenario() -> tuple[int, int, int]:
        await pool.acquire(0, waiter=Waiter(active=False))
        await pool.acquire(0, waiter=Waiter(active=False))
        idle = Waiter(active=False)
        waiting = asyncio.ensure_future(pool.acquire(5, waiter=idle))
        await asyncio.sleep(0)
        with_idle = pool.wanted()
        idle.active = True  # it sent its reset
        with_active = pool.wanted()
        waiting.cancel()
        return with_idle, with_active, pool.waiting

    with_idle, with_active, _ = asyncio.run(scenario())
    assert with_idle == 0  # two idle sessions placed and one idle waiting: nothing asks for a replica
    assert with_active == 3  # the two slots taken, plus the working session that waits


def test_active_sessions_past_80_percent_ask_for_one_more_replica() -> None:
    pool = pool_of(5, most=3)
    slots = [asyncio.run(pool.acquire(0)) for _ in range(5)]
    assert pool.wanted() == 0  # full of sessions that never sent anything
    for slot in slots[:4]:
        pool.activate(slot)
    assert pool.wanted() == 1  # 4 of 5 active: one replica holds them, and 80 % is not past 80 %
    pool.activate(slots[4])
    assert pool.wanted() == 2  # 5 of 5: one more than the one it has
    pool.release(slots[0], active=True)
    assert pool.load()[0] == 4


def test_what_a_pool_holds_at_its_most_is_known_only_when_every_replica_said() -> None:
    assert pool_of(1).held_at_most() == 1
    assert pool_of(2, 3).held_at_most() == 5
    assert pool_of(None).held_at_most() is None  # it may hold more
    assert pool_of(1, most=4).held_at_most() is None  # it may grow


def test_a_pinned_session_frees_its_slot_when_closed_when_its_socket_goes_or_when_left_idle() -> None:
    pool = pool_of(3)
    slot = asyncio.run(pool.acquire(0))
    pool.pin("s1", slot)
    assert slot.active == 0  # made, it is no load yet
    pool.work("s1")
    pool.work("s1")  # once: its first call makes it load
    assert slot.active == 1
    pool.attached("s1", +1)
    pool.close_when_detached("s1")  # asked to close while a socket is attached
    assert slot.sessions == 1 and pool.stale(0) == []  # in use: not stale however long
    pool.attached("s1", -1)
    pool.detached("s1")
    assert slot.sessions == 0 and slot.active == 0 and pool.pinned == {}

    other = asyncio.run(pool.acquire(0))
    pool.pin("s2", other)
    assert pool.stale(3600) == []
    assert [(sid, s.id) for sid, s in pool.stale(-1)] == [("s2", "r0")]


def test_a_lost_replica_tells_its_sessions_and_takes_no_more() -> None:
    pool = pool_of(2, 2)
    told: list[str] = []
    slot = pool.slots["r0"]
    pool.watch_loss(slot, told.append)
    pool.lose("r0", "its server stopped")
    assert told == ["its server stopped"]
    assert [take(pool) for _ in range(2)] == ["r1", "r1"]
    late: list[str] = []
    pool.watch_loss(slot, late.append)  # one that watches after the loss is told at once
    assert late == ["its server stopped"]


def test_a_new_replica_holds_what_the_others_said() -> None:
    pool = pool_of(None)
    assert [take(pool), take(pool)] == ["r0", "r0"]
    pool.refused(pool.slots["r0"], 1)  # the second was refused: the server holds one
    pool.set_replicas({f"r{i}": (Upstream(f"http://r{i}", {}), None, True) for i in range(3)})  # it grew by two
    assert [(s.capacity, s.said) for s in pool.slots.values()] == [(1, True)] * 3
    assert pool.load() == (1, 3, 3)
    assert sorted([take(pool), take(pool)]) == ["r1", "r2"]  # no trial beyond the one each holds
    with pytest.raises(PoolFull):
        take(pool)


def test_a_burst_on_a_replica_that_has_not_said_tries_it_with_as_many_as_it_has_shown() -> None:
    pool = pool_of(None)

    async def burst() -> tuple[int, int]:
        waiting = [asyncio.ensure_future(pool.acquire(5)) for _ in range(8)]
        await asyncio.sleep(0.05)
        on_trial = sum(1 for w in waiting if w.done())
        slot = pool.slots["r0"]
        pool.accepted(slot)  # the server took both: it holds two at least, so four may be tried
        await asyncio.sleep(0.05)
        tried_next = sum(1 for w in waiting if w.done())
        for w in waiting:
            w.cancel()
        return on_trial, tried_next

    assert asyncio.run(burst()) == (2, 4)  # not eight at once, seven of which a one-session server would refuse
