"""Check reports as they are filed (every lane's, one table), and the public shape the API returns of them."""

from datetime import datetime
from typing import Any

from sqlmodel import JSON, Field, SQLModel

from conformance.report import Report, Suite
from core.clock import utcnow

__all__ = ["CheckReport", "CheckReportBase", "CheckReportPublic", "CheckReportsPublic", "Suite"]


class CheckReportBase(SQLModel):
    """A check of one URL, and the catalog entries it is filed under."""

    url: str
    environment: str | None = Field(default=None, index=True)
    endpoint: str | None = Field(default=None, index=True)
    revision: str | None = Field(default=None, description="the environment's revision it ran on, where known")
    created_at: datetime = Field(default_factory=utcnow, index=True)
    seconds: float = 0
    verdict: str | None = Field(
        default=None, description="pass, warn or fail, by the validator's policy (conformance.engine.verdict_of)"
    )


class CheckReport(CheckReportBase, table=True):
    id: int | None = Field(default=None, primary_key=True)
    suite: str = Field(default=Suite.PROTOCOL.value, index=True)
    conforms: bool = False  # protocol checks only, as the three below
    core_passed: int = 0
    core_total: int = 0
    report: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)


class CheckReportPublic(CheckReportBase):
    """A filed report of any lane; `conforms` and the core counts are the protocol checklist's."""

    id: int
    suite: Suite
    conforms: bool
    core_passed: int
    core_total: int
    report: Report


class CheckReportsPublic(SQLModel):
    data: list[CheckReportPublic]
    count: int
