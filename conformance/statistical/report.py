"""What a statistical report carries besides its results (`conformance.report.Report.statistics`): what each
reference player scored, the gate policy its verdict follows, its settings, and the envhub instance running it."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PlayerFigures", "StatisticalRun"]


class PlayerFigures(BaseModel):
    """What one reference player scored, over the evaluation it played."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str
    kind: str = Field(description="baseline, adversarial, model, replay or oracle")
    evaluation: str = Field(description="the evaluation it played; empty for the oracle, which plays in the image")
    episodes: int
    mean_reward: float | None
    se: float | None = Field(description="the standard error of the mean reward")
    pass_rate: float | None
    pass_interval: tuple[float, float] = Field(description="Wilson 95 %")
    errors: int = Field(description="episodes that failed rather than ended or reached a limit")


class StatisticalRun(BaseModel):
    """The statistical lane's part of a report."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy_version: str = Field(description="the gate policy the verdict follows")
    gate: dict[str, Any] = Field(default_factory=dict, description="its thresholds")
    settings: dict[str, Any] = Field(default_factory=dict, description="k, G, episodes, temperature, presets, tasks")
    players: tuple[PlayerFigures, ...] = ()
    instance: str = Field(default="", description="the envhub instance that runs it")
