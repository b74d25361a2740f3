"""Hosting's parts, built once and handed each other: the endpoints the app sees, and the keeper behind them."""

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from core.callers import Access
from core.leases import Leases
from hosting.attention import Attention
from hosting.endpoint_store import EndpointStore
from hosting.endpoints import OPEN, EndpointManager
from hosting.launcher import Launcher
from hosting.lifecycle import Lifecycle
from hosting.limits import EndpointLimits
from hosting.models import Backend
from hosting.pool_cache import PoolCache
from hosting.reconcile import Keeper
from hosting.replica_store import ReplicaStore
from hosting.replicas import Replicas
from hosting.runtimes.base import AnyRuntime
from hosting.scaling import Scaler
from hosting.traffic import TrafficBook

__all__ = ["Hosting", "build_hosting"]


@dataclass(frozen=True)
class Hosting:
    """What the rest of envhub is given of hosting."""

    endpoints: EndpointManager  # launching, stopping and reading endpoints, for the app
    keeper: Keeper  # keeps the rows true against what runs
    pools: PoolCache  # the gateway's port: where it reaches each endpoint
    traffic: TrafficBook  # what the gateway counts of each endpoint


def build_hosting(
    engine: Engine,
    runtimes: dict[Backend, AnyRuntime],
    logs_dir: Path,
    limits: EndpointLimits,
    leases: Leases,
    access: Access = OPEN,
) -> Hosting:
    """Every part of hosting, each given the parts it works with."""
    attention = Attention()
    store = EndpointStore(engine)
    replica_store = ReplicaStore(engine)
    pools = PoolCache(engine, runtimes, limits, replica_store, attention)
    servers = Replicas(replica_store, runtimes, logs_dir)
    traffic = TrafficBook(engine)
    launcher = Launcher(engine, runtimes, logs_dir, limits, access, leases.instance)
    lifecycle = Lifecycle(engine, runtimes, launcher, store, replica_store, servers, pools, traffic)
    scaler = Scaler(
        lifecycle,
        rows=store,
        replicas=replica_store,
        servers=servers,
        pools=pools,
        runtimes=runtimes,
        limits=limits,
        instance=leases.instance,
    )
    keeper = Keeper(
        lifecycle,
        scaler,
        rows=store,
        replicas=replica_store,
        servers=servers,
        runtimes=runtimes,
        traffic=traffic,
        leases=leases,
        limits=limits,
        attention=attention,
    )
    endpoints = EndpointManager(launcher, lifecycle, store, replica_store, servers, pools, traffic)
    return Hosting(endpoints=endpoints, keeper=keeper, pools=pools, traffic=traffic)
