"""Reports of openenv's validator as filed: one `checkreport` row each, per environment and revision, the report
kept exactly as the validator gave it."""

from typing import Any

from sqlalchemy import Engine, func, select
from sqlmodel import Session, col

from conformance.models import CheckReport, ValidatorReportPublic, ValidatorSuite
from core.clock import utcnow
from core.errors import NotFoundError

__all__ = ["file_report", "get_validation", "list_validations", "validated_revisions"]

_MAX_LISTED = 50


def file_report(
    engine: Engine,
    suite: ValidatorSuite,
    report: dict[str, Any],
    *,
    environment: str | None,
    revision: str | None,
    tool: str,
    seconds: float,
) -> ValidatorReportPublic:
    """Store a report unchanged; its verdict is the folder report's own, or a URL report's `passed`."""
    verdict = report.get("verdict") if suite == ValidatorSuite.FOLDER else ("pass" if report.get("passed") else "fail")
    row = CheckReport(
        url=str(report.get("target", "")),
        environment=environment,
        revision=revision,
        created_at=utcnow(),
        seconds=round(seconds, 3),
        verdict=verdict,
        suite=suite.value,
        tool=tool,
        report=report,
    )
    with Session(engine) as session:
        session.add(row)
        session.commit()
        session.refresh(row)
        return ValidatorReportPublic.model_validate(row)


def list_validations(
    session: Session, environment: str, *, suite: ValidatorSuite | None = None, limit: int = 10
) -> tuple[list[ValidatorReportPublic], int]:
    """An environment's validator reports, newest first, of every revision (or those of one suite)."""
    suites = [suite.value] if suite is not None else [s.value for s in ValidatorSuite]
    statement = select(CheckReport).where(
        col(CheckReport.environment) == environment, col(CheckReport.suite).in_(suites)
    )
    count = session.execute(select(func.count()).select_from(statement.subquery())).scalar_one()
    rows = session.execute(
        statement.order_by(col(CheckReport.created_at).desc(), col(CheckReport.id).desc()).limit(
            min(limit, _MAX_LISTED)
        )
    ).scalars()
    return [ValidatorReportPublic.model_validate(r) for r in rows], count


def get_validation(session: Session, report_id: int) -> ValidatorReportPublic:
    row = session.get(CheckReport, report_id)
    if row is None or row.suite not in tuple(ValidatorSuite):
        raise NotFoundError(
            f"no validator report {report_id}; list an environment's with GET /api/environments/ID/validation",
            code="validation_not_found",
        )
    return ValidatorReportPublic.model_validate(row)


def validated_revisions(engine: Engine, environments: list[str]) -> set[tuple[str, str]]:
    """(environment, revision) pairs of these environments with a folder report filed, at any level."""
    statement = select(col(CheckReport.environment), col(CheckReport.revision)).where(
        col(CheckReport.suite) == ValidatorSuite.FOLDER.value,
        col(CheckReport.environment).in_(environments),
        col(CheckReport.revision).is_not(None),
    )
    with Session(engine) as session:
        return {(str(e), str(r)) for e, r in session.execute(statement.distinct())}
