"""Check reports as they are filed (every lane's, one table), and the public shape the API returns of them."""

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from sqlmodel import JSON, Field, SQLModel

from conformance.report import Report, Suite
from core.clock import utcnow

__all__ = [
    "CheckReport",
    "CheckReportBase",
    "CheckReportPublic",
    "CheckReportsPublic",
    "FiledReport",
    "Suite",
    "ValidatorReportPublic",
    "ValidatorSuite",
    "public",
]


class ValidatorSuite(StrEnum):
    """openenv's own validator (conformance.validator): its reports are filed by their own door, not /api/checks."""

    FOLDER = "openenv"  # `openenv validate PATH`: the environment's files
    URL = "openenv-url"  # `openenv validate --url`: a running server's contract


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
    tool: str | None = Field(default=None, description="the program and version that made the report: openenv 0.10.0")


class CheckReportPublic(CheckReportBase):
    """A filed report of any lane; `conforms` and the core counts are the protocol checklist's."""

    id: int
    suite: Suite
    conforms: bool
    core_passed: int
    core_total: int
    report: Report


class ValidatorReportPublic(CheckReportBase):
    """A filed report of openenv's validator, exactly as `openenv validate --json` printed it."""

    id: int
    suite: Literal["openenv", "openenv-url"]
    tool: str | None
    report: dict[str, Any]


FiledReport = CheckReportPublic | ValidatorReportPublic


def public(row: CheckReport) -> FiledReport:
    """The public shape of a filed report, by its suite."""
    if row.suite in tuple(ValidatorSuite):
        return ValidatorReportPublic.model_validate(row)
    return CheckReportPublic.model_validate(row)


class CheckReportsPublic(SQLModel):
    data: list[FiledReport]
    count: int
