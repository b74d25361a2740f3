"""A statistical report: the seven `statistical.*` results (the quality report's result type), what each reference
player scored, the settings and the gate policy it ran under, and the verdict."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from catalog.models import Verdict
from conformance.quality.report import QualityResult, Severity, verdict_of

__all__ = ["PlayerFigures", "StatisticalReport"]


class PlayerFigures(BaseModel):
    """What one reference player scored, over the evaluation it played."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str
    kind: str = Field(description="baseline, adversarial, model or replay")
    evaluation: str
    episodes: int
    mean_reward: float | None
    se: float | None = Field(description="the standard error of the mean reward")
    pass_rate: float | None
    pass_interval: tuple[float, float] = Field(description="Wilson 95 %")
    errors: int = Field(description="episodes that failed rather than ended or reached a limit")


class StatisticalReport(BaseModel):
    """Filed when it starts (status running), and again when it ends."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    suite: Literal["statistical"] = "statistical"
    status: Literal["running", "finished", "failed"] = "running"
    code: str | None = Field(
        default=None, description="why it failed: interrupted (envhub stopped), player_failed or internal_error"
    )
    message: str = ""
    instance: str = Field(default="", description="the envhub instance that runs it")
    target: str = Field(description="the endpoint's gateway URL the players played through")
    endpoint: str
    environment: str
    revision: str | None = None
    policy_version: str = Field(description="the gate policy the verdict follows")
    gate: dict[str, Any] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict, description="k, G, episodes, temperature, presets, tasks")
    checked_at: datetime
    duration_s: float = 0
    players: tuple[PlayerFigures, ...] = ()
    results: tuple[QualityResult, ...] = ()
    severities: dict[str, Severity] = Field(default_factory=dict)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> Verdict | None:
        if self.status == "failed":
            return Verdict.FAIL
        return verdict_of(self.results, self.severities) if self.status == "finished" else None

    def result(self, check_id: str) -> QualityResult:
        return next(r for r in self.results if r.check_id == check_id)
