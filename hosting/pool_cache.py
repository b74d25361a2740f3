"""A cache of each running endpoint's pool of replicas, read from their rows: where the gateway reaches them.

`PoolCache` is the control plane's side of the gateway's port (gateway.wiring.ControlPlane): the gateway asks it
for an endpoint's pool, on its event loop, and gets what was read a moment ago or a read done off the loop, so
no SQL ever runs where sessions are relayed. What the gateway tells it (a replica did not answer, sessions wait,
what a replica holds) goes to the keeper's mailbox (hosting.attention) and the replicas' rows.
"""

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from gateway.pools import Pool
from gateway.slots import Slot, Upstream
from gateway.wiring import Down
from hosting.attention import Attention
from hosting.limits import EndpointLimits
from hosting.models import Backend, Endpoint, EndpointStatus, Replica, ReplicaStatus
from hosting.options import ReplicaRange
from hosting.replica_store import ReplicaStore
from hosting.runtimes.base import AnyRuntime, handle_of

ROUTED = (ReplicaStatus.READY, ReplicaStatus.DRAINING)  # replicas the gateway reaches: draining ones for their sessions

__all__ = ["PoolCache"]

# How long the gateway trusts what it read of a pool's replicas: the watch interval, so that a
# replica stopped or added through another envhub is not missed for long.
RESOLVE_TTL_S = 2.0
_ABSENT_MAX = 10_000  # ids remembered as not running (most are guesses: a flood of them costs one read each)
_READ_LOCKS = 64  # reads of one endpoint take turns, so that a slow read never overwrites a newer one
# Threads of the gateway's own for its reads: a session's first message never queues behind the pages' and the
# control plane's work in the event loop's shared executor (a Space followed while it builds holds a thread for
# minutes).
_READERS = 4


class PoolCache:
    """Where the gateway reaches each running endpoint: its pool, read from the replicas' rows, trusted for a moment.

    The pools live as long as their endpoints run, so that what they count (sessions per
    replica, what each server said it holds) carries over each read.
    """

    def __init__(
        self,
        engine: Engine,
        runtimes: dict[Backend, AnyRuntime],
        limits: EndpointLimits,
        replica_store: ReplicaStore,
        attention: Attention,
    ) -> None:
        self.engine = engine
        self.runtimes = runtimes
        self.limits = limits
        self.replica_store = replica_store
        self.attention = attention
        self._pools: dict[str, tuple[Pool, float]] = {}
        self._absent: dict[str, tuple[Down, float]] = {}
        self._lock = threading.Lock()
        self._reading = [threading.Lock() for _ in range(_READ_LOCKS)]
        self._readers = ThreadPoolExecutor(_READERS, thread_name_prefix="pools")

    # -- the gateway's port (gateway.wiring.ControlPlane), called on its event loop

    async def pool(self, endpoint_id: str) -> Pool | Down:
        found = self.cached(endpoint_id)
        if found is not None:
            return found
        return await asyncio.get_running_loop().run_in_executor(self._readers, self.lookup, endpoint_id)

    def check_soon(self, endpoint_id: str) -> None:
        self.attention.check_soon(endpoint_id)

    async def note_capacity(self, slot: Slot) -> None:
        await asyncio.to_thread(self.replica_store.note_capacity, slot.id, slot.capacity)

    # -- reading

    def cached(self, endpoint_id: str) -> Pool | Down | None:
        """What the last read found while it is fresh (a pool, or why there is none), without reading: None when a
        read is due. The gateway calls this on its event loop, and reads off it."""
        now = time.monotonic()
        with self._lock:
            known = self._pools.get(endpoint_id)
            if known is not None and now - known[1] < RESOLVE_TTL_S:
                return known[0]
            absent = self._absent.get(endpoint_id)
        return absent[0] if absent is not None and now - absent[1] < RESOLVE_TTL_S else None

    def lookup(self, endpoint_id: str) -> Pool | Down:
        """The endpoint's pool, or why there is none; reads the database when what is cached is stale."""
        found = self.cached(endpoint_id)
        if found is None:
            found = self.refresh(endpoint_id)
        if found is None:
            with self._lock:
                found = self._absent.get(endpoint_id, (Down(None), 0.0))[0]
        return found

    def resolve(self, endpoint_id: str) -> Pool | None:
        """The pool of a running endpoint; None when it is not running."""
        with self._lock:
            known = self._pools.get(endpoint_id)
        if known is not None and time.monotonic() - known[1] < RESOLVE_TTL_S:
            return known[0]
        return self.refresh(endpoint_id)

    def refresh(self, endpoint_id: str) -> Pool | None:
        """Read the endpoint's replicas now (after the pool changed here)."""
        with self._reading[hash(endpoint_id) % _READ_LOCKS]:
            return self._read(endpoint_id)

    def _read(self, endpoint_id: str) -> Pool | None:
        with Session(self.engine) as session:
            endpoint = session.get(Endpoint, endpoint_id)
            rows = session.exec(
                select(Replica).where(col(Replica.endpoint) == endpoint_id, col(Replica.status).in_(ROUTED))
            ).all()
        runtime = self.runtimes.get(endpoint.backend) if endpoint is not None else None
        if endpoint is None or endpoint.status != EndpointStatus.RUNNING or runtime is None:
            self.forget(endpoint_id)
            down = Down(None) if endpoint is None else _down(endpoint)
            with self._lock:
                if len(self._absent) >= _ABSENT_MAX:
                    self._absent.clear()
                self._absent[endpoint_id] = (down, time.monotonic())
            return None
        replicas = {}
        for row in rows:
            handle = handle_of(runtime, row.handle)
            if handle is None or not row.internal_url:
                continue
            upstream = Upstream(row.internal_url, runtime.auth_headers(handle), handle.root_path)
            replicas[row.id] = (upstream, row.capacity, row.status == ReplicaStatus.READY)
        size = ReplicaRange.model_validate(endpoint.options.get("replicas", 1))
        limits = self.limits
        with self._lock:
            known = self._pools.get(endpoint_id)
            pool = (
                known[0]
                if known is not None
                else Pool(
                    endpoint_id,
                    queue=limits.queue,
                    queue_per_client=limits.queue_per_client,
                    held_per_client=limits.held_per_client,
                    on_pressure=lambda: self.attention.size_soon(endpoint_id),
                )
            )
            self._pools[endpoint_id] = (pool, time.monotonic())
            self._absent.pop(endpoint_id, None)
        pool.most = size.max
        pool.owner, pool.private = endpoint.owner, endpoint.private
        pool.set_replicas(replicas)
        return pool

    def pools(self) -> list[Pool]:
        """Every pool as last read."""
        with self._lock:
            return [pool for pool, _ in self._pools.values()]

    def known(self, endpoint_id: str) -> Pool | None:
        """The pool as last read, without reading again."""
        with self._lock:
            known = self._pools.get(endpoint_id)
        return known[0] if known is not None else None

    def forget(self, endpoint_id: str) -> None:
        with self._lock:
            self._pools.pop(endpoint_id, None)


def _down(endpoint: Endpoint) -> Down:
    """Why a known endpoint serves nothing now: what it is doing, or since when and why it ended."""
    ended = endpoint.status in (EndpointStatus.STOPPED, EndpointStatus.FAILED)
    since = f" since {endpoint.stopped_at:%Y-%m-%d %H:%M:%S} UTC" if ended and endpoint.stopped_at else ""
    return Down(f"endpoint {endpoint.id} is {endpoint.status.value}{since}: {endpoint.message}", ended=ended)
