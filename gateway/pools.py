"""Pools: an endpoint's replicas behind its one URL, and which replica each new session goes to.

The gateway asks its endpoint's pool for a slot for every new WebSocket session (and
every MCP session created over HTTP). The pool hands out the replica with the most free
slots; a replica's capacity is what its server said (the `max_sessions` of a
CAPACITY_REACHED, or the launch's MAX_CONCURRENT_ENVS), or what another replica of the
endpoint said (they serve the same app), and 1 until one says. A replica that has not said
is tried before a session waits, with as many sessions beyond what it has shown it holds as
it has shown (one, then two, four...): a burst of sessions on a new one-session server is
not a burst of refusals. When every slot is taken the
session waits for one to free or for the pool to grow; the pool tells whoever scales it
that sessions are waiting. Only active sessions (ones that sent the server something) press it to
grow, so idle sockets cannot grow someone's pool; the queue is bounded in all and per client, and so
are the sessions one client holds on a public endpoint. The state is this envhub's: what its gateway routed.
"""

import asyncio
import contextlib
import itertools
import math
import threading
import time
from collections.abc import Callable

from gateway.lending import Lender
from gateway.slots import HeldFull, PoolFull, QueueFull, Slot, Upstream, Waiter, user_client

__all__ = ["Pool"]


class Pool:
    """One endpoint's slots, its waiting sessions, and the MCP sessions pinned to replicas."""

    def __init__(
        self,
        endpoint_id: str,
        *,
        most: int = 1,
        queue: int = 512,
        queue_per_client: int = 128,
        held_per_client: int = 0,
        on_pressure: Callable[[], None] = lambda: None,
    ) -> None:
        self.endpoint_id = endpoint_id
        self.most = most  # the replicas it may grow to
        self.queue = queue  # sessions that may wait at once
        self.queue_per_client = queue_per_client
        self.held_per_client = held_per_client  # sessions one client may hold on it when public; 0: no cap
        self._held: dict[str, int] = {}  # client -> sessions it holds now
        self.owner: str | None = None  # who launched the endpoint
        self.private = False  # its URL needs the owner's (or the endpoint's) bearer token
        self.slots: dict[str, Slot] = {}
        self.pinned: dict[str, str] = {}  # MCP session id -> replica id
        self._closing: set[str] = set()  # pinned sessions the server closes when their attached socket goes
        self._used: dict[str, float] = {}  # pinned session -> when it was last used (monotonic)
        self._attached: dict[str, int] = {}  # pinned session -> sockets attached to it now
        self._pinned_by: dict[str, str] = {}  # pinned session -> the client that made it
        self._working: set[str] = set()  # pinned sessions that asked for work: load that may grow the pool
        self.on_pressure = on_pressure  # sessions wait or the pool is nearly full: the control plane may grow it
        self.lender = Lender(self)  # envhub's own sessions on its replicas, which give way when a session waits
        self._lock = threading.Lock()
        self._waiters: list[tuple[Waiter, asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._turn = itertools.count()

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiters)

    # -- what the replicas are (the manager's and the route table's side)

    def set_replicas(self, replicas: dict[str, tuple[Upstream, int | None, bool]]) -> None:
        """The replicas as their rows say: id -> (upstream, capacity said, accepting). Counts carry over."""
        losses: list[Callable[[str], None]] = []
        with self._lock:
            for replica_id in set(self.slots) - set(replicas):
                gone = self.slots.pop(replica_id)
                losses += gone._losses
                self._unpin_all(replica_id)
            said = [s.capacity for s in self.slots.values() if s.said]
            for replica_id, (upstream, capacity, accepting) in replicas.items():
                slot = self.slots.get(replica_id)
                if slot is None:
                    slot = self.slots[replica_id] = Slot(replica_id, upstream)
                    if capacity is None and said:  # a new replica of the same app holds what the others said
                        slot.capacity, slot.said = min(said), True
                slot.upstream, slot.accepting = upstream, accepting and slot.lost is None
                if capacity is not None and not slot.said:
                    slot.capacity, slot.said = capacity, True
        for tell in losses:
            tell("its replica was stopped")
        self._wake()

    def lose(self, replica_id: str, reason: str) -> None:
        """A replica died or hung: it takes no more sessions, and each of its sessions is told why."""
        with self._lock:
            slot = self.slots.get(replica_id)
            if slot is None or slot.lost is not None:
                return
            slot.lost, slot.accepting = reason, False
            losses, slot._losses = slot._losses, []
            self._unpin_all(replica_id)
        for tell in losses:
            tell(reason)

    def drain(self, replica_id: str) -> bool:
        """Take no new sessions on a replica; whether it has none left (and may be stopped now)."""
        with self._lock:
            slot = self.slots.get(replica_id)
            if slot is None:
                return True
            slot.accepting = False
            return slot.sessions == 0

    # -- sessions (the gateway's side)

    async def acquire(self, queue_s: float, avoid: frozenset[str] = frozenset(), waiter: Waiter | None = None) -> Slot:
        """A slot for a new session: the replica with the most free slots, waiting up to queue_s for one.

        A session that would pass the queue's bounds (in all, or its client's share) is refused at once.
        """
        waiter = waiter or Waiter(active=True)
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        waited = False
        try:
            while True:
                event.clear()
                slot = self._take(avoid, waiter.client)
                if slot is not None:
                    return slot
                if not waited:
                    self._enqueue(waiter, loop, event)
                    waited = True
                if waiter.active:
                    self.on_pressure()
                left = queue_s - (time.monotonic() - started)
                if left <= 0:
                    sessions, capacity, replicas = self.load()
                    raise PoolFull(sessions, capacity, replicas, self.most, queue_s)
                avoid = frozenset()  # something changed: a replica that refused may have room now
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), timeout=min(left, 1.0))
        finally:
            if waited:
                with self._lock:
                    self._waiters.remove((waiter, loop, event))

    def _enqueue(self, waiter: Waiter, loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
        with self._lock:
            mine = sum(1 for w, _, _ in self._waiters if w.client == waiter.client) if waiter.client else 0
            if len(self._waiters) >= self.queue:
                limit, waiting = "queue_max", len(self._waiters)
            elif waiter.client and mine >= self.queue_per_client:
                limit, waiting = "queue_per_client", mine
            else:
                self._waiters.append((waiter, loop, event))
                limit, waiting = "", 0
        if not limit:
            self.lender.recall()
            return
        sessions, capacity, replicas = self.load()
        raise QueueFull(sessions, capacity, replicas, self.most, limit, waiting)

    def _take(self, avoid: frozenset[str], client: str) -> Slot | None:
        """A slot, counted against the client; HeldFull when it holds all one client may."""
        with self._lock:
            held = self._held.get(client, 0)
            if client and held >= self.held_per_client > 0 and not self.private and not self._owns(client):
                raise HeldFull(self.endpoint_id, held, self.held_per_client)
            open_ = [s for s in self.slots.values() if s.accepting and s.id not in avoid]
            free = [s for s in open_ if s.free > 0]
            if free:
                # Most free slots first; among equals, take turns.
                ordered = sorted(free, key=lambda s: s.id)
                turn = next(self._turn) % len(ordered)
                slot = max(ordered[turn:] + ordered[:turn], key=lambda s: s.free)
            else:
                # A replica that has not said what it holds may hold more: try it before waiting, with at most as
                # many sessions on trial as it has shown it holds.
                untold = [s for s in open_ if not s.said and s.sessions < 2 * s.capacity]
                if not untold:
                    return None
                slot = min(untold, key=lambda s: s.sessions)
            slot.sessions += 1
            if client:
                self._held[client] = held + 1
        return slot

    def take_spare(self, replica_id: str, own: int) -> Slot | None:
        """A slot on that replica for envhub's own work (gateway.lending), only while no session waits for one. When
        all its sessions are that work's own (`own`), one more is let through: the server's answer says what it holds.
        """
        with self._lock:
            if self._waiters:
                return None
            others = frozenset(self.slots) - {replica_id}
        slot = self._take(others, "")
        with self._lock:
            alone = self.slots.get(replica_id)
            if slot is None and alone is not None and alone.accepting and alone.sessions <= own:
                alone.sessions += 1
                return alone
        return slot

    def _owns(self, client: str) -> bool:
        """Whether the client is the endpoint's owner, whose own endpoint's slots are all theirs to hold."""
        return self.owner is not None and client == user_client(self.owner)

    def accepted(self, slot: Slot) -> None:
        """The server took a session beyond what it was believed to hold: it holds at least that many, and may be
        tried with more."""
        with self._lock:
            grew = not slot.said and slot.sessions > slot.capacity
            if grew:
                slot.capacity = slot.sessions
        if grew:
            self._wake()

    def refused(self, slot: Slot, max_sessions: int | None, *, active: bool = False, client: str = "") -> None:
        """The server refused the session (CAPACITY_REACHED): now it has said what it holds."""
        with self._lock:
            self._let_go(slot, active, client)
            if max_sessions is not None and max_sessions > 0:
                slot.capacity, slot.said = max_sessions, True
        self._wake()

    def activate(self, slot: Slot) -> None:
        """A session on the slot sent its server something: it counts as load that may grow the pool."""
        with self._lock:
            slot.active += 1
            nearly_full = self._fullness() > 0.8 and self._open() < self.most  # at its most, nothing to grow
        if nearly_full:
            self.on_pressure()

    def release(self, slot: Slot, *, active: bool = False, client: str = "") -> None:
        """A session ended (`active`: it had been activated; `client`: whose it was, as it was acquired)."""
        with self._lock:
            self._let_go(slot, active, client)
            if slot.sessions == 0:
                slot.idle_since = time.monotonic()
        self._wake()

    def _let_go(self, slot: Slot, active: bool, client: str) -> None:
        slot.sessions -= 1
        if active:
            slot.active -= 1
        self._unheld(client)

    def _unheld(self, client: str) -> None:
        if client in self._held:
            self._held[client] -= 1
            if self._held[client] <= 0:
                del self._held[client]

    def watch_loss(self, slot: Slot, tell: Callable[[str], None]) -> Callable[[], None]:
        """Be told (from any thread) when the slot's replica is lost; the returned function stops that."""
        with self._lock:
            if slot.lost is None:
                slot._losses.append(tell)
                lost = None
            else:
                lost = slot.lost
        if lost is not None:
            tell(lost)

        def forget() -> None:
            with self._lock:
                if tell in slot._losses:
                    slot._losses.remove(tell)

        return forget

    # -- MCP sessions made over HTTP

    def pin(self, session_id: str, slot: Slot, client: str = "") -> None:
        with self._lock:
            self.pinned[session_id] = slot.id
            self._used[session_id] = time.monotonic()
            self._pinned_by[session_id] = client

    def _unpin_all(self, replica_id: str) -> None:
        """A replica went: its pinned sessions went with it, and no longer count against their clients."""
        for session_id in [sid for sid, rid in self.pinned.items() if rid == replica_id]:
            del self.pinned[session_id]
            self._working.discard(session_id)
            self._unheld(self._pinned_by.pop(session_id, ""))

    def pinned_slot(self, session_id: str) -> Slot | None:
        """The replica a pinned session lives on; asking counts as using the session."""
        with self._lock:
            replica_id = self.pinned.get(session_id)
            if replica_id is not None:
                self._used[session_id] = time.monotonic()
            return self.slots.get(replica_id) if replica_id else None

    def work(self, session_id: str) -> None:
        """A pinned session asked its server for work (a call other than its making): from then on it is load that
        may grow the pool, as a `/ws` session is once it sends something; made and left idle, it is not."""
        with self._lock:
            replica_id = self.pinned.get(session_id)
            slot = self.slots.get(replica_id) if replica_id and session_id not in self._working else None
            if slot is not None:
                self._working.add(session_id)
        if slot is not None:
            self.activate(slot)

    def attached(self, session_id: str, delta: int) -> None:
        """A socket attached to a pinned session (+1) or left it (-1): while one is, the session is in use."""
        with self._lock:
            self._attached[session_id] = self._attached.get(session_id, 0) + delta
            if self._attached[session_id] <= 0:
                del self._attached[session_id]
            self._used[session_id] = time.monotonic()

    def stale(self, idle_s: float) -> list[tuple[str, Slot]]:
        """Pinned sessions nobody has used (no call, no attached socket) for longer than that, with their replicas:
        a client that made one and went away, whose slot would stay taken for good."""
        now = time.monotonic()
        with self._lock:
            self._used = {sid: at for sid, at in self._used.items() if sid in self.pinned}
            return [
                (sid, self.slots[rid])
                for sid, rid in self.pinned.items()
                if rid in self.slots and sid not in self._attached and now - self._used.get(sid, now) > idle_s
            ]

    def close_when_detached(self, session_id: str) -> None:
        """The server will close the session once its attached socket goes (`closing`): free its slot then."""
        with self._lock:
            if session_id in self.pinned:
                self._closing.add(session_id)

    def detached(self, session_id: str) -> None:
        """A socket attached to the session ended: a session asked to close has closed with it."""
        with self._lock:
            closing = session_id in self._closing
        if closing:
            self.unpin(session_id)

    def unpin(self, session_id: str) -> Slot | None:
        """The session closed: its replica's slot is free again."""
        with self._lock:
            replica_id = self.pinned.pop(session_id, None)
            self._closing.discard(session_id)
            self._used.pop(session_id, None)
            client = self._pinned_by.pop(session_id, "")
            working = session_id in self._working
            self._working.discard(session_id)
            slot = self.slots.get(replica_id) if replica_id else None
        if slot is not None:
            self.release(slot, active=working, client=client)
        return slot

    # -- stateless HTTP

    def any_ready(self) -> Slot | None:
        """A ready replica for a stateless request, in turn."""
        with self._lock:
            ready = sorted((s for s in self.slots.values() if s.accepting), key=lambda s: s.id)
            return ready[next(self._turn) % len(ready)] if ready else None

    # -- numbers

    def load(self) -> tuple[int, int, int]:
        """Sessions, capacity and replicas, over the replicas that take sessions."""
        with self._lock:
            open_ = [s for s in self.slots.values() if s.accepting]
            return sum(s.sessions for s in open_), sum(s.capacity for s in open_), len(open_)

    def held_at_most(self) -> int | None:
        """The sessions the pool holds at its most replicas, when it is there and every replica said what it holds;
        else None (it may hold more)."""
        with self._lock:
            open_ = [s for s in self.slots.values() if s.accepting]
            if not open_ or len(open_) < self.most or not all(s.said for s in open_):
                return None
            return sum(s.capacity for s in open_)

    def _open(self) -> int:
        return sum(1 for s in self.slots.values() if s.accepting)

    def _fullness(self) -> float:
        """How full the pool is of active sessions (idle sockets hold slots, but do not make it grow)."""
        open_ = [s for s in self.slots.values() if s.accepting]
        capacity = sum(s.capacity for s in open_)
        return sum(s.active for s in open_) / capacity if capacity else 1.0

    def wanted(self) -> int:
        """How many replicas the sessions now would fill. Active sessions waiting (ones that sent something) need
        room beyond every slot taken; idle ones waiting need none. One more when active sessions fill the pool past
        80 %. So sockets that never send anything can take free slots, but never grow a pool."""
        with self._lock:
            open_ = [s for s in self.slots.values() if s.accepting]
            per_replica = max((s.capacity for s in self.slots.values() if s.said), default=1)
            waiting = sum(1 for waiter, _, _ in self._waiters if waiter.active)
            placed = sum(s.sessions for s in open_) if waiting else sum(s.active for s in open_)
            busy = placed + waiting
            wanted = math.ceil(busy / per_replica) if busy else 0
            if open_ and self._fullness() > 0.8:
                wanted = max(wanted, len(open_) + 1)
            return wanted

    def idle(self, longer_than_s: float) -> list[str]:
        """Replicas without sessions (or pinned ones) for longer than that, longest idle first."""
        now = time.monotonic()
        with self._lock:
            held = set(self.pinned.values())
            idle = [
                s for s in self.slots.values()
                if s.accepting and s.sessions == 0 and s.id not in held and now - s.idle_since > longer_than_s
            ]  # fmt: skip
            return [s.id for s in sorted(idle, key=lambda s: s.idle_since)]

    def sessions_of(self, replica_id: str) -> int:
        with self._lock:
            slot = self.slots.get(replica_id)
            return slot.sessions if slot is not None else 0

    def _wake(self) -> None:
        with self._lock:
            wakers = [(loop, event) for _, loop, event in self._waiters]
        for loop, event in wakers:
            loop.call_soon_threadsafe(event.set)

    def nudge(self) -> None:
        """A waiting session became active: whoever scales the pool should look again."""
        self.on_pressure()
