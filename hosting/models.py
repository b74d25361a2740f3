"""Hosting's tables (endpoints, their replicas and pool events, publications) and the public shapes the API
returns of them."""

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlmodel import JSON, Field, SQLModel

from catalog.models import ConformanceSummary, Health, HealthRecord
from core.clock import utcnow
from core.db import ModelJSON


class Backend(StrEnum):
    PROCESS = "process"
    DOCKER = "docker"
    SWARM = "swarm"
    SPACE = "space"


class EndpointStatus(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


ACTIVE = (EndpointStatus.STARTING, EndpointStatus.RUNNING)  # an endpoint that holds a server, or will


class ReplicaStatus(StrEnum):
    STARTING = "starting"
    READY = "ready"  # takes sessions
    DRAINING = "draining"  # takes no new sessions; stopped when its last one ends
    UNHEALTHY = "unhealthy"  # stopped answering; being replaced
    STOPPED = "stopped"
    FAILED = "failed"


LIVE = (ReplicaStatus.STARTING, ReplicaStatus.READY, ReplicaStatus.DRAINING, ReplicaStatus.UNHEALTHY)


class EndpointBase(SQLModel):
    id: str = Field(primary_key=True, description="short, URL-safe")
    environment: str = Field(index=True)
    revision: str | None = Field(
        default=None, description="the exact revision it serves: a Space's sha, a template's folder hash"
    )
    image_digest: str | None = Field(
        default=None, description="the image its containers run (docker), by id: every later replica runs that one"
    )
    backend: Backend
    status: EndpointStatus = Field(default=EndpointStatus.STARTING, index=True)
    message: str = Field(default="", description="what is happening now, or why it failed")
    reason: str = Field(
        default="starting", description="the message's stable code (hosting.reasons, or a failed launch's error code)"
    )
    owner: str | None = Field(default=None, index=True)
    options: dict[str, Any] = Field(default_factory=dict, sa_type=JSON, description="secrets are not kept here")
    for_play: bool = Field(
        default=False, description="launched from the Play tab: stopped after the shorter idle time of play"
    )
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    stopped_at: datetime | None = None


class Endpoint(EndpointBase, table=True):
    instance: str | None = Field(
        default=None, index=True, description="the envhub instance that manages it; its server runs there"
    )
    last_active_at: datetime | None = Field(
        default=None, description="the last gateway traffic any instance saw, written every few seconds"
    )
    handle: dict[str, Any] = Field(
        default_factory=dict, sa_type=JSON, description="a service backend's service (its replicas are its tasks)"
    )
    log_path: str | None = None
    health: HealthRecord | None = Field(default=None, sa_type=ModelJSON(HealthRecord))
    conformance: dict[str, Any] | None = Field(default=None, sa_type=JSON)

    @property
    def private(self) -> bool:
        """Whether its URL answers only a bearer of its owner's Hub token or its own (launch option `private`)."""
        return self.options.get("private") is True


class Replica(SQLModel, table=True):
    """One server of an endpoint's pool."""

    id: str = Field(primary_key=True, description="<endpoint>-<n>, or a service's task id")
    endpoint: str = Field(index=True)
    status: ReplicaStatus = Field(default=ReplicaStatus.STARTING, index=True)
    internal_url: str | None = None
    host: str = Field(default="", description="the machine or swarm node it runs on")
    handle: dict[str, Any] = Field(default_factory=dict, sa_type=JSON, description="what the backend needs to stop it")
    capacity: int | None = Field(default=None, description="the sessions it holds, once the server or launch said")
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    stopped_at: datetime | None = None
    last_error: str = ""


class PoolEvent(SQLModel, table=True):
    """A pool grew, shrank, or replaced a replica: the last few are shown with the endpoint."""

    id: int | None = Field(default=None, primary_key=True)
    endpoint: str = Field(index=True)
    at: datetime = Field(default_factory=utcnow)
    kind: str = Field(description="grow, shrink, replace, restart, lost, hold, fail, gave_way")
    message: str
    reason: str = Field(default="", description="the message's stable code: why the pool did it")


class ReplicaPublic(SQLModel):
    id: str
    status: ReplicaStatus
    internal_url: str | None
    host: str
    sessions: int = Field(description="sessions through this envhub's gateway now")
    capacity: int = Field(description="what the server said it holds; 1 until it says")
    capacity_said: bool
    started_at: datetime | None
    last_error: str


class PoolEventPublic(SQLModel):
    at: datetime
    kind: str
    message: str
    reason: str


class PoolPublic(SQLModel):
    """An endpoint's replicas behind its one URL, and what they hold."""

    min: int
    max: int
    sessions: int
    capacity: int = Field(description="the sessions the ready replicas hold together")
    capacity_at_max: int = Field(description="what the pool holds grown to max, at the replicas' capacity")
    generation_batch_size: int = Field(
        description="the most sessions to open at once: TRL's generation_batch_size, or a trainer's parallel rollouts"
    )
    waiting: int = Field(description="new sessions waiting for a free slot")
    replicas: list[ReplicaPublic]
    events: list[PoolEventPublic]


class EndpointStats(SQLModel):
    """Live traffic through the gateway since the endpoint started."""

    active_sessions: int = 0
    sessions: int = 0
    requests: int = 0
    steps: int = 0
    errors: int = 0
    step_p50_ms: float | None = None
    step_p95_ms: float | None = None
    last_active_at: datetime | None = None


class EndpointPublic(EndpointBase):
    url: str = Field(description="the gateway URL to give a trainer")
    latest: str | None = Field(
        default=None, description="the catalog's newer revision of the environment, when it has one"
    )
    internal_url: str | None = Field(default=None, description="where envhub itself reaches a ready replica")
    pool: PoolPublic | None = None
    stats: EndpointStats = Field(default_factory=EndpointStats)
    log_tail: list[str] = Field(default_factory=list)
    access_token: str | None = Field(
        default=None,
        description="the endpoint's own bearer token, shown to its owner and the admin only: a private endpoint's URL "
        "needs it; on a public one it tells its owner apart, whose sessions no per-client cap counts",
    )
    health: Health | None = None
    conformance: ConformanceSummary | None = None


class EndpointsPublic(SQLModel):
    data: list[EndpointPublic]
    count: int


class PublicationStatus(StrEnum):
    BUILDING = "building"
    CHECKING = "checking"
    RUNNING = "running"
    FAILED = "failed"


class PublicationBase(SQLModel):
    """A template deployed as a Space in a user's namespace, followed until it runs and is checked."""

    id: str = Field(primary_key=True, description="short, URL-safe")
    environment: str = Field(index=True, description="the template it was made from")
    space: str = Field(index=True, description="owner/name of the new Space")
    owner: str = Field(index=True)
    status: PublicationStatus = PublicationStatus.BUILDING
    message: str = ""
    reason: str = Field(default="building", description="the message's stable code")
    space_url: str = Field(description="the Space's page on the Hub")
    url: str | None = Field(default=None, description="where the Space's server answers, once it runs")
    check_id: int | None = Field(default=None, description="the conformance report, once it runs")
    conforms: bool | None = None
    created_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None


class Publication(PublicationBase, table=True):
    pass


class PublicationPublic(PublicationBase):
    pass
