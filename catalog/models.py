"""Catalog tables and the public shapes the API returns."""

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import JSON, Field, SQLModel

from catalog.checks.report import ConformanceReport, ConformanceSummary
from core.clock import utcnow
from protocol.health import HealthStatus


class Source(StrEnum):
    HUB = "hub"
    TEMPLATE = "template"
    URL = "url"


class EnvironmentBase(SQLModel):
    """What a search result shows about an environment."""

    id: str = Field(primary_key=True, description="owner/name for Hub Spaces, template:NAME for templates")
    source: Source = Field(index=True)
    title: str
    emoji: str | None = None
    description: str = ""
    author: str | None = Field(default=None, index=True)
    # JSONB on Postgres, where a GIN index on it serves the tag filter.
    tags: list[str] = Field(default_factory=list, sa_type=JSON().with_variant(JSONB(), "postgresql"))
    likes: int = Field(default=0, index=True)
    trending_score: float = Field(default=0, index=True)
    sdk: str | None = Field(default=None, index=True)
    host: str | None = Field(default=None, description="base URL of the running environment")
    runtime_stage: str | None = Field(default=None, index=True)
    last_modified: datetime | None = Field(default=None, index=True)
    license: str | None = None
    problems: list[str] = Field(default_factory=list, sa_type=JSON)
    removed_at: datetime | None = Field(default=None, index=True)


class EnvironmentFull(EnvironmentBase):
    """Everything stored about an environment."""

    app_port: int | None = None
    base_path: str | None = None
    path: str | None = Field(default=None, description="local folder of a template")
    sha: str | None = None
    card: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    manifest: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    readme: str = ""
    env_metadata: dict[str, Any] | None = Field(default=None, sa_type=JSON, description="GET /metadata, cached")
    env_schema: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    tools: list[dict[str, Any]] | None = Field(default=None, sa_type=JSON)
    tasks: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    health: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    conformance: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    indexed_at: datetime = Field(default_factory=utcnow)


class Environment(EnvironmentFull, table=True):
    pass


class EnvironmentTag(SQLModel, table=True):
    """One row per (environment, tag), so tag filters use an index on any database."""

    environment_id: str = Field(primary_key=True, foreign_key="environment.id", ondelete="CASCADE")
    tag: str = Field(primary_key=True, index=True)


class LinkOrigin(StrEnum):
    ENVIRONMENT = "environment"  # the Space's card lists the dataset
    DATASET = "dataset"  # the dataset's card or tags name the Space


class EnvironmentDataset(SQLModel, table=True):
    """A link between an environment and a dataset, and whose card made it."""

    environment_id: str = Field(primary_key=True)
    dataset_id: str = Field(primary_key=True, index=True)
    named_by: LinkOrigin = Field(primary_key=True)


class Health(SQLModel):
    """What the health monitor last saw of an environment or endpoint."""

    status: HealthStatus
    message: str = ""
    checked_at: datetime | None = None
    since: datetime | None = Field(default=None, description="when the status last changed")
    health_ms: float | None = Field(default=None, description="GET /health latency, median of recent probes")
    reset_ms: float | None = Field(default=None, description="reset latency, median of recent probes")
    cold_start_s: float | None = Field(default=None, description="from launch or wake until /health answered")


class EnvironmentPublic(EnvironmentBase):
    health: Health | None = None
    conformance: ConformanceSummary | None = None


class EnvironmentDetail(EnvironmentFull):
    datasets: list[str] = Field(default_factory=list)
    health: Health | None = None  # type: ignore[assignment]
    conformance: ConformanceSummary | None = None  # type: ignore[assignment]


class EnvironmentsPublic(SQLModel):
    data: list[EnvironmentPublic]
    count: int


class DatasetBase(SQLModel):
    id: str = Field(primary_key=True)
    author: str | None = Field(default=None, index=True)
    description: str = ""
    tags: list[str] = Field(default_factory=list, sa_type=JSON)
    likes: int = 0
    downloads: int = 0
    last_modified: datetime | None = None
    problems: list[str] = Field(default_factory=list, sa_type=JSON)
    removed_at: datetime | None = Field(default=None, index=True)


class Dataset(DatasetBase, table=True):
    sha: str | None = None
    card: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    indexed_at: datetime = Field(default_factory=utcnow)


class DatasetPublic(DatasetBase):
    pass


class DatasetDetail(DatasetBase):
    card: dict[str, Any] = Field(default_factory=dict)
    environments: list[str] = Field(default_factory=list)


class DatasetsPublic(SQLModel):
    data: list[DatasetPublic]
    count: int


class SyncStatus(StrEnum):
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"


class SyncCounts(SQLModel):
    """What a sync did to the catalog."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    failed: int = 0
    datasets: int = 0


class SyncRunBase(SyncCounts):
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    status: SyncStatus = SyncStatus.RUNNING
    full: bool = False
    requests: int = 0
    seconds: float = 0
    error: str | None = None
    replica: str | None = Field(default=None, description="the envhub replica that runs or ran it")


class SyncRun(SyncRunBase, table=True):
    id: int | None = Field(default=None, primary_key=True)


class SyncRunPublic(SyncRunBase):
    id: int

    def summary(self) -> str:
        """The one line a person reads after a sync."""
        if self.status == SyncStatus.FAILED:
            return f"sync failed after {self.seconds:.1f} s ({self.requests} requests): {self.error}"
        return (
            f"sync {self.status.value}: {self.added} added, {self.updated} updated, "
            f"{self.unchanged} unchanged, {self.removed} removed, {self.failed} failed, "
            f"{self.datasets} datasets; {self.requests} requests in {self.seconds:.1f} s"
        )


class SyncRunsPublic(SQLModel):
    data: list[SyncRunPublic]
    count: int


class Backend(StrEnum):
    PROCESS = "process"
    DOCKER = "docker"
    SPACE = "space"


class EndpointStatus(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


class EndpointBase(SQLModel):
    id: str = Field(primary_key=True, description="short, URL-safe")
    environment: str = Field(index=True)
    backend: Backend
    status: EndpointStatus = Field(default=EndpointStatus.STARTING, index=True)
    message: str = Field(default="", description="what is happening now, or why it failed")
    owner: str | None = Field(default=None, index=True)
    options: dict[str, Any] = Field(default_factory=dict, sa_type=JSON, description="secrets are not kept here")
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    stopped_at: datetime | None = None


class Endpoint(EndpointBase, table=True):
    replica: str | None = Field(
        default=None, index=True, description="the envhub replica that manages it; its server runs there"
    )
    last_active_at: datetime | None = Field(
        default=None, description="the last gateway traffic any replica saw, written every few seconds"
    )
    internal_url: str | None = None
    handle: dict[str, Any] = Field(default_factory=dict, sa_type=JSON, description="what the backend needs to stop it")
    log_path: str | None = None
    health: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    conformance: dict[str, Any] | None = Field(default=None, sa_type=JSON)


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
    internal_url: str | None = Field(default=None, description="where envhub itself reaches the server")
    stats: EndpointStats = Field(default_factory=EndpointStats)
    log_tail: list[str] = Field(default_factory=list)
    health: Health | None = None
    conformance: ConformanceSummary | None = None


class EndpointsPublic(SQLModel):
    data: list[EndpointPublic]
    count: int


class CheckReportBase(SQLModel):
    """A conformance check of one URL, and the catalog entries it is filed under."""

    url: str
    environment: str | None = Field(default=None, index=True)
    endpoint: str | None = Field(default=None, index=True)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    conforms: bool = False
    core_passed: int = 0
    core_total: int = 0
    seconds: float = 0


class CheckReport(CheckReportBase, table=True):
    id: int | None = Field(default=None, primary_key=True)
    report: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)


class CheckReportPublic(CheckReportBase):
    id: int
    report: ConformanceReport


class CheckReportsPublic(SQLModel):
    data: list[CheckReportPublic]
    count: int


class UserSession(SQLModel, table=True):
    """A signed-in browser. The cookie holds a random id; only its hash and the sealed Hub token are kept."""

    id: str = Field(primary_key=True, description="sha256 of the session cookie's value")
    username: str = Field(index=True)
    fullname: str = ""
    avatar_url: str | None = None
    token_sealed: str = Field(description="the user's Hub access token, sealed; never stored or shown in clear")
    scopes: str = ""
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime = Field(index=True)


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
