"""What a quality report finds, in the shape of OpenEnv's validator (RFC 008, `openenv validate --json`).

Each result has the validator's fields (`check_id`, `status`, `measured`, `evidence`,
`remediation`, `duration_s`); the report adds the target, the environment and revision it
ran on, the severity each check's failure carries, the operational figures and the verdict.
The verdict follows the validator's policy: an `error` fails, a `fail` of a fail-severity
check fails, a `fail` of a warn-severity check or any `skip` warns, and otherwise it passes.
"""

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from catalog.models import QualitySummary, Verdict
from conformance.report import Outcome

__all__ = ["Figures", "QualityReport", "QualityResult", "Severity", "Verdict", "verdict_of"]


class Severity(StrEnum):
    """What a check's failure does to the verdict: `fail` fails it, `warn` only warns."""

    FAIL = "fail"
    WARN = "warn"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class QualityResult(_Frozen):
    """One check, field for field as openenv's validator reports it."""

    check_id: str = Field(pattern=r"^[a-z_]+\.[a-z_]+$")
    status: Outcome
    measured: dict[str, Any] = Field(default_factory=dict)
    evidence: list[str] = Field(default_factory=list, description="short, readable lines")
    remediation: str | None = Field(default=None, description="what the environment's author changes to go green")
    duration_s: float = Field(ge=0)


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


class QualityReport(_Frozen):
    """A quality report of one environment server (an endpoint's gateway, a pool's when one runs)."""

    # A stored report carries its computed fields too; reading it back ignores them.
    model_config = ConfigDict(frozen=True, extra="ignore")

    suite: Literal["quality"] = "quality"
    target: str = Field(description="the base URL the report ran against")
    environment: str | None = None
    revision: str | None = Field(default=None, description="the catalog's sha of the environment, when it has one")
    checked_at: datetime
    duration_s: float
    results: tuple[QualityResult, ...]
    severities: dict[str, Severity] = Field(description="what each check's failure carries in this report")
    figures: Figures = Field(default_factory=Figures)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> Verdict:
        return verdict_of(self.results, self.severities)

    def result(self, check_id: str) -> QualityResult:
        return next(r for r in self.results if r.check_id == check_id)

    def summary(self, report_id: int | None = None) -> QualitySummary:
        counted = {status: sum(r.status == status for r in self.results) for status in Outcome}
        return QualitySummary(
            verdict=self.verdict,
            passed=counted[Outcome.PASS],
            failed=counted[Outcome.FAIL],
            skipped=counted[Outcome.SKIP],
            errors=counted[Outcome.ERROR],
            failing=[r.check_id for r in self.results if r.status in (Outcome.FAIL, Outcome.ERROR)],
            revision=self.revision,
            checked_at=self.checked_at,
            report_id=report_id,
        )


def verdict_of(results: tuple[QualityResult, ...], severities: dict[str, Severity]) -> Verdict:
    """The validator's policy: an error or a failed fail-severity check fails; a warn-severity failure or a
    skip warns."""
    verdict = Verdict.PASS
    for result in results:
        severity = severities.get(result.check_id, Severity.FAIL)
        if result.status == Outcome.ERROR or (result.status == Outcome.FAIL and severity == Severity.FAIL):
            return Verdict.FAIL
        if result.status in (Outcome.FAIL, Outcome.SKIP):
            verdict = Verdict.WARN
    return verdict
