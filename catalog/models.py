"""The catalog's tables (environments, datasets, syncs) and the public shapes the API returns of them."""

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic import Field as PydanticField
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import JSON, Field, SQLModel

from core.clock import utcnow
from core.db import ModelJSON
from envclient.health import HealthStatus


class Source(StrEnum):
    HUB = "hub"
    TEMPLATE = "template"
    URL = "url"


class Verdict(StrEnum):
    """A quality report's overall verdict (conformance.quality), by openenv's validator's policy."""

    PASS = "pass"  # noqa: S105  (a verdict, not a password)
    WARN = "warn"
    FAIL = "fail"


class ConformanceSummary(BaseModel):
    """The few numbers a catalog entry shows of its last conformance check."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    conforms: bool
    core_passed: int = Field(description="core and 0.10 checks that applied and passed")
    core_total: int = Field(description="core and 0.10 checks that applied (skips excluded)")
    warnings: int = Field(description="warn-level checks that did not pass")
    checked_at: datetime
    report_id: int | None = None


class QualitySummary(BaseModel):
    """What a catalog entry shows of its last quality report (conformance.quality): the verdict and its counts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    verdict: Verdict
    passed: int
    failed: int
    skipped: int
    errors: int
    failing: list[str] = Field(default_factory=list, description="check ids that failed or could not run")
    revision: str | None = Field(default=None, description="the environment's sha the report ran on")
    checked_at: datetime
    report_id: int | None = None


class BoardSummary(BaseModel):
    """What a catalog entry shows of its newest finished board submission (app.usecases.submissions)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    submission: int
    revision: str
    status: str = PydanticField(description="done, or failed when a stage could not run")
    verdict: Verdict | None = None
    training_signal: float | None = None
    finished_at: datetime


class Health(SQLModel):
    """What the health monitor last saw of an environment or endpoint."""

    status: HealthStatus
    message: str = ""
    reason: str = Field(default="", description="the message's stable code (envclient.health, catalog.health)")
    checked_at: datetime | None = None
    since: datetime | None = Field(default=None, description="when the status last changed")
    health_ms: float | None = Field(default=None, description="GET /health latency, median of recent probes")
    reset_ms: float | None = Field(default=None, description="reset latency, median of recent probes")
    cold_start_s: float | None = Field(default=None, description="from launch or wake until /health answered")
    # Only while a wake is under way: the JSON has no such key otherwise.
    waking_since: datetime | None = PydanticField(
        default=None, exclude_if=lambda value: value is None, description="when the wake under way was asked for"
    )


class HealthRecord(Health):
    """The health as a row keeps it: with the latencies the medians come from."""

    samples: dict[str, list[float]] = Field(default_factory=dict, description="recent latencies by kind, in ms")


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
    health: HealthRecord | None = Field(default=None, sa_type=ModelJSON(HealthRecord))
    conformance: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    quality: dict[str, Any] | None = Field(default=None, sa_type=JSON, description="the last quality report's summary")
    board: dict[str, Any] | None = Field(default=None, sa_type=JSON, description="the newest board submission's")
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


class EnvironmentPublic(EnvironmentBase):
    health: Health | None = None
    conformance: ConformanceSummary | None = None
    quality: QualitySummary | None = None
    board: BoardSummary | None = None


class EnvironmentDetail(EnvironmentFull):
    datasets: list[str] = Field(default_factory=list)
    latest: str | None = Field(
        default=None, description="the catalog's current revision, when the id pinned an older one (`id@sha`)"
    )
    health: Health | None = None  # type: ignore[assignment]
    conformance: ConformanceSummary | None = None  # type: ignore[assignment]
    quality: QualitySummary | None = None  # type: ignore[assignment]
    board: BoardSummary | None = None  # type: ignore[assignment]


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
    instance: str | None = Field(default=None, description="the envhub instance that runs or ran it")


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
