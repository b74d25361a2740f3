"""Hosted endpoints as the app sees them: launching and stopping on request, and what it may read of them.

A launch is checked by the launcher (hosting.launcher) and recorded and started by the lifecycle
(hosting.lifecycle); keeping the rows true against what actually runs is the keeper's (hosting.reconcile).
The app asks this for rows, pools and counts through its query methods, never through its parts.
"""

import builtins
from pathlib import Path

from catalog.models import ConformanceSummary
from core.callers import Access, Caller
from gateway.pools import Pool
from hosting import reasons
from hosting.endpoint_store import EndpointStore
from hosting.launcher import Launcher
from hosting.lifecycle import Lifecycle
from hosting.models import Backend, Endpoint, EndpointStats, PoolPublic, Replica
from hosting.options import LaunchRequest
from hosting.pool_cache import PoolCache
from hosting.replica_store import ReplicaStore
from hosting.replicas import Replicas
from hosting.runtimes.base import AnyRuntime
from hosting.traffic import TrafficBook

__all__ = ["OPEN", "EndpointManager"]

OPEN = Access(sign_in=False, anonymous_launch=True)  # no sign-in: anyone launches, and stops what nobody owns


class EndpointManager:
    """Endpoints of one envhub instance: it launches and stops its own, and its gateway serves any.

    envhub instances sharing a database each manage the endpoints they launched (the row's
    `instance`): a process endpoint's servers run on that instance's machine.
    """

    def __init__(
        self,
        launcher: Launcher,
        lifecycle: Lifecycle,
        store: EndpointStore,
        replica_store: ReplicaStore,
        servers: Replicas,
        pools: PoolCache,
        traffic: TrafficBook,
    ) -> None:
        self._launcher = launcher
        self._lifecycle = lifecycle
        self._store = store
        self._replica_store = replica_store
        self._servers = servers
        self._pools = pools
        self._traffic = traffic

    @property
    def access(self) -> Access:
        """Who may launch, see and stop what."""
        return self._launcher.access

    @property
    def instance(self) -> str:
        """This envhub instance, as endpoint rows name the one that manages them."""
        return self._launcher.instance

    @property
    def per_owner(self) -> int:
        """How many endpoints one owner may run at once."""
        return self._launcher.limits.per_owner

    def backends(self) -> list[Backend]:
        """The launch backends this server offers."""
        return list(self._launcher.runtimes)

    def runtime(self, backend: Backend) -> AnyRuntime | None:
        return self._launcher.runtimes.get(backend)

    def log_path(self, endpoint_id: str) -> Path:
        return self._launcher.log_path(endpoint_id)

    # -- commands

    def launch(self, request: LaunchRequest, caller: Caller, *, for_play: bool = False) -> Endpoint:
        """The one way to launch: check who asks and the request, record the endpoint as the caller's,
        starting, and start its first replicas in the background. One `for_play` (the Play tab's) goes after the
        shorter idle time of play."""
        endpoint, spec = self._launcher.prepare(request, caller, for_play=for_play)
        return self._lifecycle.open(endpoint, spec)

    def stop(self, endpoint_id: str, caller: Caller) -> Endpoint:
        """Stop an endpoint on request: its owner or the admin may (see Access for one nobody owns)."""
        endpoint = self._store.get(endpoint_id)
        self.access.ensure_may_manage(caller, endpoint_id, endpoint.owner)
        return self._lifecycle.end(endpoint_id, "stopped on request", reasons.STOPPED_ON_REQUEST)

    def end(self, endpoint_id: str, message: str) -> Endpoint:
        """Stop an endpoint its run launched, now done with it, and record which run (message)."""
        return self._lifecycle.end(endpoint_id, message, reasons.RUN_DONE)

    def note_conformance(self, endpoint_id: str, summary: ConformanceSummary) -> None:
        self._store.note_conformance(endpoint_id, summary)

    def event(self, endpoint_id: str, kind: str, message: str, reason: str) -> None:
        """An event in the endpoint's pool's history."""
        self._replica_store.event(endpoint_id, kind, message, reason)

    # -- queries

    def get(self, endpoint_id: str) -> Endpoint:
        """The endpoint's row; NotFoundError when there is none."""
        return self._store.get(endpoint_id)

    def find(self, endpoint_id: str) -> Endpoint | None:
        return self._store.find(endpoint_id)

    def list(self, *, owner: str | None = None, active_only: bool = False) -> list[Endpoint]:
        """Endpoints, newest first."""
        return self._store.list(owner=owner, active_only=active_only)

    def running_endpoint(self, environment_id: str) -> Endpoint | None:
        return self._store.running_endpoint(environment_id)

    def active_by_environment(self) -> dict[str, str]:
        """Each environment's newest active endpoint."""
        return self._store.active_by_environment()

    def newer_revision(self, endpoint: Endpoint) -> str | None:
        return self._store.newer_revision(endpoint)

    def pool_of(self, endpoint: Endpoint) -> PoolPublic:
        """The endpoint's pool as shown: its replicas' rows, with what the gateway counts of each."""
        return self._replica_store.public(endpoint, self._pools.known(endpoint.id))

    def replicas(self, endpoint_id: str, *, live_only: bool = True) -> builtins.list[Replica]:
        """The endpoint's replicas' rows: the live ones, or every one it had."""
        return self._replica_store.rows(endpoint_id, live_only=live_only)

    def stats(self, endpoint: Endpoint) -> EndpointStats:
        """Its sessions and traffic."""
        return self._traffic.stats(endpoint)

    def resolve(self, endpoint_id: str) -> Pool | None:
        """The pool of a running endpoint (read now when what is cached is stale); None when it is not running."""
        return self._pools.resolve(endpoint_id)

    def known_pool(self, endpoint_id: str) -> Pool | None:
        """The pool as last read, without reading again."""
        return self._pools.known(endpoint_id)

    def resident_bytes(self, endpoint: Endpoint) -> int | None:
        """The memory the endpoint's ready servers hold together, where envhub can see it."""
        return self._servers.resident_bytes(endpoint)
