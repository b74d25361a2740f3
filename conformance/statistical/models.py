"""Difficulty per task, as a statistical report measured it for the model it ran (or, without one, its best honest
player): pass@k, mean reward with its standard error, and P(signal) for a GRPO group of the report's size."""

from datetime import datetime
from typing import Any

from sqlmodel import JSON, Field, SQLModel

from core.clock import utcnow

__all__ = ["TaskDifficulty"]


class TaskDifficulty(SQLModel, table=True):
    report: int = Field(primary_key=True, description="the statistical report (checkreport id) that measured it")
    task: str = Field(primary_key=True, description="the task's reset options as JSON, or seed:<n>")
    environment: str = Field(index=True)
    revision: str | None = None
    player: str = Field(description="the player it was measured for: the model's preset, or a baseline")
    evaluation: str = Field(description="the evaluation whose episodes it counts")
    reset: dict[str, Any] = Field(default_factory=dict, sa_type=JSON, description="what resets the endpoint to it")
    samples: int
    passes: int
    pass_at_k: float | None = None
    k: int
    mean_reward: float | None = None
    se: float | None = Field(default=None, description="the standard error of the mean reward")
    p_signal: float
    p_signal_low: float
    p_signal_high: float
    group_size: int
    created_at: datetime = Field(default_factory=utcnow)
