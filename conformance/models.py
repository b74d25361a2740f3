"""Conformance reports as they are filed, and the public shapes the API returns of them."""

from datetime import datetime
from typing import Any

from sqlmodel import JSON, Field, SQLModel

from conformance.report import ConformanceReport
from core.clock import utcnow


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
