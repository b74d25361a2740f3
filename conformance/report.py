"""A report of one run of checks, whatever its lane: the results, what the run learned, and the verdict.

A lane whose run takes long (the statistical) files its report `running` when it starts and again when it ends.

Reports stored before the engine was one still read: a protocol report's `url`, `seconds` and `checks`, and a
quality report's `severities`, become the fields below.
"""

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from catalog.models import ConformanceSummary, QualitySummary, Verdict
from conformance.engine import CheckResult, Level, Outcome, verdict_of
from conformance.statistical.report import StatisticalRun

__all__ = ["Figures", "Report", "RunStatus", "ServerProfile", "Suite"]


class Suite(StrEnum):
    PROTOCOL = "protocol"  # the conformance checklist
    QUALITY = "quality"  # the hub lane (conformance.quality)
    STATISTICAL = "statistical"  # the statistical lane (conformance.statistical)


class RunStatus(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"  # it could not finish: `code` and `message` say why


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ServerProfile(_Frozen):
    """What the checklist learned about the server while checking it."""

    mode: str | None = Field(default=None, description="simulation or production, from /openapi.json")
    generation: str | None = Field(default=None, description="'0.10' when it has the newer features, else 'older'")
    env_name: str | None = Field(default=None, description="the Task API name")
    max_sessions: int | None = Field(default=None, description="the session limit, when the server revealed it")
    mcp_tools: int | None = Field(default=None, description="tools listed by tools/list; None without MCP")
    web_ui: bool = False


class Figures(_Frozen):
    """How the server performs: measured, never judged (they do not change the verdict)."""

    cold_start_s: float | None = None
    cold_start_from: str | None = Field(
        default=None, description="'launch': from the launch to the first healthy answer; 'reset': the first reset"
    )
    steps_per_s: dict[str, float] = Field(default_factory=dict, description="sessions at once -> steps per second")
    capacity: int | None = Field(default=None, description="sessions held at once before the server refused one")
    capacity_reached: bool = Field(default=False, description="False: the probe stopped at its bound first")
    memory_per_session_mb: float | None = None
    notes: list[str] = Field(default_factory=list, description="why a figure is missing, or what bounds it")
    duration_s: float = 0


class Report(_Frozen):
    """One run of a lane's checks against one server."""

    # A stored report carries its computed fields too; reading it back ignores them.
    model_config = ConfigDict(frozen=True, extra="ignore")

    suite: Suite
    target: str = Field(description="the base URL the checks ran against")
    environment: str | None = None
    revision: str | None = Field(default=None, description="the environment's revision it ran on, where known")
    checked_at: datetime
    duration_s: float
    results: tuple[CheckResult, ...]
    profile: ServerProfile | None = Field(default=None, description="the checklist's: what the server is")
    figures: Figures | None = Field(default=None, description="the hub lane's: how the server performs")
    statistics: StatisticalRun | None = Field(
        default=None, description="the statistical lane's: its players, gate policy and settings"
    )
    status: RunStatus = RunStatus.FINISHED
    code: str | None = Field(
        default=None, description="why it failed: interrupted, player_failed, internal_error or an envhub error code"
    )
    message: str = ""

    @model_validator(mode="before")
    @classmethod
    def _stored_before(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if "checks" in data:  # a protocol report as it was stored
            renamed = {"suite": Suite.PROTOCOL, "target": data.get("url"), "duration_s": data.get("seconds", 0)}
            return {**data, **renamed, "results": data["checks"]}
        if "severities" in data:  # a quality report as it was stored: each result's severity beside the results
            severities = data["severities"]
            results = [
                {**r, "severity": severities.get(r.get("check_id"), "fail")} if isinstance(r, dict) else r
                for r in data.get("results") or ()
            ]
            return {**data, "results": results}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> Verdict | None:
        """None while the run is under way; a run that could not finish fails."""
        if self.status != RunStatus.FINISHED:
            return None if self.status == RunStatus.RUNNING else Verdict.FAIL
        # A checklist skip means "does not apply to this server": it does not warn.
        return verdict_of(self.results, skip_warns=self.suite != Suite.PROTOCOL)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def failing(self) -> list[str]:
        """Ids of checks that failed or could not run."""
        return [r.check_id for r in self.results if r.status in (Outcome.FAIL, Outcome.ERROR)]

    @property
    def conforms(self) -> bool:
        """The checklist's: every core check passed, and every 0.10 check the server's features call for."""
        return all(r.status == Outcome.PASS for r in self.results if r.counts)

    @property
    def core_passed(self) -> int:
        return sum(r.status == Outcome.PASS for r in self.results if r.counts)

    @property
    def core_total(self) -> int:
        return sum(r.counts for r in self.results)

    @property
    def warnings(self) -> list[str]:
        """The checklist's warnings that failed or could not run."""
        return [r.check_id for r in self.results if r.level == Level.WARN and r.check_id in self.failing]

    def result(self, check_id: str) -> CheckResult:
        return next(r for r in self.results if r.check_id == check_id)

    def conformance_summary(self, report_id: int | None = None) -> ConformanceSummary:
        return ConformanceSummary(
            conforms=self.conforms,
            core_passed=self.core_passed,
            core_total=self.core_total,
            warnings=len(self.warnings),
            checked_at=self.checked_at,
            report_id=report_id,
        )

    def quality_summary(self, report_id: int | None = None) -> QualitySummary:
        counted = {status: sum(r.status == status for r in self.results) for status in Outcome}
        return QualitySummary(
            verdict=self.verdict or Verdict.FAIL,  # a quality report is filed once it has finished
            passed=counted[Outcome.PASS],
            failed=counted[Outcome.FAIL],
            skipped=counted[Outcome.SKIP],
            errors=counted[Outcome.ERROR],
            failing=self.failing,
            revision=self.revision,
            checked_at=self.checked_at,
            report_id=report_id,
        )
