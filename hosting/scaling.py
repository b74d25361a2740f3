"""Keeping each pool the size its load needs, and its replicas alive.

For every running endpoint this envhub manages, on each watch and at once when sessions
wait: replicas that died, or that the swarm shut down, are lost (their sessions are told
why) and replaced to keep the pool's min; the pool grows (up to max) while sessions wait
or it is over 80 % full, and shrinks (down to min) by replicas that had no sessions for
the pool's idle time. A replica being removed drains: it takes no new session and is
stopped when its last one ends. Every second the liveness probe asks each ready replica
for /health; one that misses it twice in a row has hung, and is lost and replaced too.
"""

import logging
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from core.errors import EnvhubError
from gateway.pools import Pool
from hosting import reasons
from hosting.endpoint_store import EndpointStore
from hosting.lifecycle import Lifecycle
from hosting.limits import EndpointLimits
from hosting.models import Backend, Endpoint, EndpointStatus, Replica, ReplicaStatus
from hosting.options import ReplicaRange
from hosting.pool_cache import PoolCache
from hosting.replica_store import ReplicaStore
from hosting.replicas import Replicas
from hosting.runtimes.base import AnyRuntime, handle_of, is_service
from hosting.runtimes.logs import LIVENESS_QUERY

__all__ = ["LIVENESS_INTERVAL_S", "Scaler", "Sizing", "sizing"]

log = logging.getLogger(__name__)

LIVENESS_INTERVAL_S = 1.0
LIVENESS_TIMEOUT_S = 2.0
MISSES = 3  # /health deadlines missed in a row before a replica counts as hung
# A replica that sent its sessions something this recently is busy (an engine thinking over a move blocks its
# server's loop for seconds), not hung: its missed /health deadlines do not count.
BUSY_S = 10.0
# An endpoint that loses this many replicas this quickly, and has none ready, is failed rather than replaced again.
CRASH_LOOP_LOSSES = 3
CRASH_LOOP_S = 600


@dataclass(frozen=True)
class Sizing:
    """What a pool should do now: grow to so many replicas (`kind`: to keep its min, or for its load), or drain
    these idle ones, or nothing."""

    grow_to: int | None = None
    kind: str = ""
    drain: tuple[str, ...] = ()


def sizing(size: ReplicaRange, serving: int, wanted: int, ready: set[str], idle: list[str]) -> Sizing:
    """The decision for a pool of `serving` replicas (starting or ready) whose load wants `wanted`: within its
    min and max; shrinking only by ready replicas idle long enough (longest idle first), never below the target."""
    target = min(size.max, max(size.min, wanted))
    if serving < target:
        return Sizing(grow_to=target, kind="replace" if serving < size.min else "grow")
    if serving > target:
        return Sizing(drain=tuple([r for r in idle if r in ready][: serving - target]))
    return Sizing()


class Scaler:
    """Sizes and heals the pools of the endpoints one envhub manages."""

    def __init__(
        self,
        lifecycle: Lifecycle,
        *,
        rows: EndpointStore,
        replicas: ReplicaStore,
        servers: Replicas,
        pools: PoolCache,
        runtimes: dict[Backend, AnyRuntime],
        limits: EndpointLimits,
        instance: str,
    ) -> None:
        self.lifecycle = lifecycle  # what the scaler decides, the lifecycle does and records
        self.rows = rows
        self.store = replicas
        self.servers = servers
        self.pools = pools
        self.runtimes = runtimes
        self.limits = limits
        self.instance = instance
        self._locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
        self._soon: set[str] = set()
        self._misses: dict[str, int] = {}
        self._asked: dict[str, int] = {}  # endpoint -> the tasks last asked of its service
        self._probes = ThreadPoolExecutor(8, thread_name_prefix="liveness")
        self._client = httpx.Client(timeout=LIVENESS_TIMEOUT_S)

    def _mine(self, endpoint: Endpoint) -> bool:
        return endpoint.instance == self.instance and endpoint.status == EndpointStatus.RUNNING

    # -- each watch

    def tend(self, endpoint: Endpoint) -> None:
        """Find the replicas that died, then size the pool."""
        with self._locks[endpoint.id]:
            self.pools.resolve(endpoint.id)
            if endpoint.handle:  # a service: the orchestrator says which tasks run
                try:
                    _, ended = self.lifecycle.sync_tasks(endpoint)
                except EnvhubError as exc:
                    log.warning("could not read the tasks of %s: %s", endpoint.id, exc.message)
                    return
                for replica in ended:
                    self._count_loss(endpoint, f"replica {replica.id}: {replica.last_error}", reasons.REPLICA_DIED)
            else:
                for replica in self.store.rows(endpoint.id):
                    if replica.status in (ReplicaStatus.READY, ReplicaStatus.DRAINING) and not (
                        self.servers.is_running(endpoint, replica)
                    ):
                        died = f"replica {replica.id}: {self.servers.death_note(replica)}"
                        self.lose(endpoint, replica, died, reasons.REPLICA_DIED)
            self._size(endpoint, self.pools.resolve(endpoint.id))

    def scale_soon(self, endpoint_id: str) -> None:
        """Sessions wait, or the pool is nearly full: size it now rather than at the next watch."""
        if endpoint_id in self._soon:
            return
        self._soon.add(endpoint_id)

        def size() -> None:
            try:
                endpoint = self.rows.get(endpoint_id)
                if self._mine(endpoint):
                    with self._locks[endpoint_id]:
                        self._size(endpoint, self.pools.known(endpoint_id))
            except EnvhubError as exc:
                log.debug("endpoint %s not sized: %s", endpoint_id, exc.message)
            finally:
                self._soon.discard(endpoint_id)

        threading.Thread(target=size, name=f"scale-{endpoint_id}", daemon=True).start()

    def _size(self, endpoint: Endpoint, pool: Pool | None) -> None:
        if self.rows.get(endpoint.id).status != EndpointStatus.RUNNING:
            return  # stopped or failed meanwhile
        size = ReplicaRange.model_validate(endpoint.options.get("replicas", 1))
        rows = self.store.rows(endpoint.id)
        serving = [r for r in rows if r.status in (ReplicaStatus.STARTING, ReplicaStatus.READY)]
        ready = {r.id for r in serving if r.status == ReplicaStatus.READY}
        idle = pool.idle(self.limits.pool_idle_s) if pool is not None else []
        decided = sizing(size, len(serving), pool.wanted() if pool is not None else 0, ready, idle)
        if decided.grow_to is not None:
            self._grow(endpoint, decided.grow_to, len(serving), decided.kind)
        elif decided.drain and pool is not None:
            for replica_id in decided.drain:
                self.lifecycle.drain(endpoint, replica_id)
            rows = self.store.rows(endpoint.id)
        for replica in rows:
            if replica.status == ReplicaStatus.DRAINING and (pool is None or pool.drain(replica.id)):
                self._shrink(endpoint, replica)

    def _grow(self, endpoint: Endpoint, target: int, now: int, kind: str) -> None:
        runtime = self.runtimes[endpoint.backend]
        if is_service(runtime):
            service = handle_of(runtime, endpoint.handle)
            if service is None or self._asked.get(endpoint.id, now) == target:
                return  # asked already: the orchestrator is starting them
            self._asked[endpoint.id] = target
            runtime.scale(service, target)
            why = "to keep the pool's min" if kind == "replace" else "sessions were waiting or the pool was nearly full"
            self.store.event(
                endpoint.id, kind, f"asked the swarm for {target} tasks, from {now} ({why})", reasons.SWARM_ASKED
            )
            return
        self.lifecycle.grow(endpoint, target - now, kind)

    def _shrink(self, endpoint: Endpoint, replica: Replica) -> None:
        """A drained replica without sessions: stopped (a service's: the swarm removes one of its tasks)."""
        runtime = self.runtimes[endpoint.backend]
        service = handle_of(runtime, endpoint.handle)
        self.lifecycle.stop_replica(endpoint, replica, status=ReplicaStatus.STOPPED)
        idle = self.limits.pool_idle_s
        if service is not None and is_service(runtime):
            left = len([r for r in self.store.rows(endpoint.id) if r.status != ReplicaStatus.DRAINING])
            self._asked[endpoint.id] = left
            runtime.scale(service, left)
        idled = f"replica {replica.id} stopped after {idle:g} s without sessions"
        self.store.event(endpoint.id, "shrink", idled, reasons.REPLICA_IDLE)

    def lose(self, endpoint: Endpoint, replica: Replica, message: str, reason: str) -> None:
        """A replica that died or hung: its sessions are told, it is stopped, and the pool replaces it."""
        self.lifecycle.lose(endpoint, replica, message)
        self._count_loss(endpoint, message, reason)

    def _count_loss(self, endpoint: Endpoint, message: str, reason: str) -> None:
        """The pool's event; an endpoint whose servers keep dying is failed rather than replaced again."""
        self.store.event(endpoint.id, "lost", message, reason)
        lost = self.store.losses(endpoint.id, CRASH_LOOP_S)
        if lost >= CRASH_LOOP_LOSSES and not self.store.rows(endpoint.id, ready_only=True):
            minutes = f"{CRASH_LOOP_S / 60:g} minutes"
            dying = f"its servers keep dying ({lost} lost in {minutes}); the last: {message}"
            self.lifecycle.fail(endpoint, dying, reasons.REPLICAS_KEEP_DYING)
        else:
            self.lifecycle.note(
                endpoint.id, f"running; replacing a lost replica ({message})", reasons.REPLACING_REPLICA
            )

    # -- liveness

    def probe(self) -> None:
        """Ask the ready replicas of this envhub's endpoints for /health; lose those that miss it MISSES times running
        while sending their sessions nothing (a busy server is slow to answer, a hung one silent). A replica its
        sessions heard from lately is not asked: its frames say it lives, and under load the probes would take the
        gateway's CPU."""
        mine = [e for e in self.rows.list(active_only=True) if self._mine(e)]
        ready = [(e, r) for e in mine for r in self.store.rows(e.id) if r.status == ReplicaStatus.READY]
        checks = []
        for endpoint, replica in ready:
            if self._busy(endpoint, replica):
                self._misses.pop(replica.id, None)
            else:
                checks.append((endpoint, replica))
        answers = list(self._probes.map(lambda pair: self._answers(*pair), checks))
        for (endpoint, replica), answered in zip(checks, answers, strict=True):
            if answered or self._busy(endpoint, replica):
                self._misses.pop(replica.id, None)
                continue
            self._misses[replica.id] = self._misses.get(replica.id, 0) + 1
            if self._misses[replica.id] >= MISSES and self.servers.is_running(endpoint, replica):
                self._misses.pop(replica.id)
                with self._locks[endpoint.id]:
                    late = f"GET /health took over {LIVENESS_TIMEOUT_S:g} s {MISSES} times running"
                    hung = f"replica {replica.id}: the server stopped answering ({late})"
                    self.lose(endpoint, replica, hung, reasons.REPLICA_HUNG)
                    self._size(endpoint, self.pools.known(endpoint.id))

    def _busy(self, endpoint: Endpoint, replica: Replica) -> bool:
        pool = self.pools.known(endpoint.id)
        slot = pool.slots.get(replica.id) if pool is not None else None
        heard = slot.last_heard() if slot is not None else None
        return heard is not None and time.monotonic() - heard < BUSY_S

    def _answers(self, endpoint: Endpoint, replica: Replica) -> bool:
        handle = self.servers.handle(endpoint, replica)
        if handle is None or not replica.internal_url:
            return True
        headers = self.runtimes[endpoint.backend].auth_headers(handle)
        started = time.monotonic()
        try:
            self._client.get(f"{replica.internal_url}/health?{LIVENESS_QUERY}", headers=headers)
        except httpx.TimeoutException:
            return False
        except httpx.HTTPError:
            # Refused or reset: it died, which the watch finds; an error status is an answer.
            return time.monotonic() - started < LIVENESS_TIMEOUT_S
        return True

    def close(self) -> None:
        self._probes.shutdown(wait=False, cancel_futures=True)
        self._client.close()
