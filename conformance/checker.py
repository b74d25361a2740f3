"""Checks run on request, a few at a time, and their reports: filed under environments and endpoints, and read."""

import asyncio

from sqlalchemy import Engine, func, select
from sqlmodel import Session, col

from catalog.store import environment_at, note_conformance
from conformance import ConformanceReport, check_url
from conformance.models import CheckReport, CheckReportPublic
from core.errors import NotFoundError, TooManyRequestsError
from core.outbound import OutboundGuard

_MAX_LISTED = 50


class Checker:
    """Runs conformance checks for the API, a few at a time, and files their reports."""

    def __init__(
        self,
        engine: Engine,
        guard: OutboundGuard,
        *,
        timeout_s: float = 10,
        deadline_s: float = 30,
        max_running: int = 4,
    ) -> None:
        self.engine = engine
        self.guard = guard
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s
        self.max_running = max_running
        self._running = 0

    async def run(self, url: str, *, trusted: tuple[str, ...] = ()) -> ConformanceReport:
        """Check a URL without filing the report."""
        if self._running >= self.max_running:
            raise TooManyRequestsError(
                f"{self._running} checks are running, the most this server runs at once; try again in a minute"
            )
        self._running += 1
        try:
            guard = self.guard.with_trusted(*trusted) if trusted else self.guard
            return await check_url(url, guard, timeout_s=self.timeout_s, deadline_s=self.deadline_s)
        finally:
            self._running -= 1

    async def check(
        self,
        url: str,
        *,
        environment: str | None = None,
        endpoint: str | None = None,
        trusted: tuple[str, ...] = (),
    ) -> CheckReportPublic:
        """Check a URL and file the report under its environment (found by host when not given) and endpoint."""
        url = self.guard.normalize(url)
        if environment is None:
            environment = await asyncio.to_thread(self._environment_at, url)
        report = await self.run(url, trusted=trusted)
        return await asyncio.to_thread(self.file, report, environment, endpoint)

    def _environment_at(self, url: str) -> str | None:
        with Session(self.engine) as session:
            return environment_at(session, url)

    def file(self, report: ConformanceReport, environment: str | None, endpoint: str | None) -> CheckReportPublic:
        """Store a report under the environment and endpoint it belongs to, and its summary on the environment.

        An endpoint's row is hosting's to write: it takes the summary from the filed report.
        """
        row = CheckReport(
            url=report.url,
            environment=environment,
            endpoint=endpoint,
            created_at=report.checked_at,
            conforms=report.conforms,
            core_passed=report.core_passed,
            core_total=report.core_total,
            seconds=report.seconds,
            report=report.model_dump(mode="json"),
        )
        with Session(self.engine) as session:
            session.add(row)
            session.flush()
            assert row.id is not None
            if environment is not None:
                note_conformance(session, environment, report.summary(row.id))
            session.commit()
            session.refresh(row)
            return CheckReportPublic.model_validate(row)


def list_reports(
    session: Session, *, environment: str | None = None, endpoint: str | None = None, limit: int = 10
) -> tuple[list[CheckReportPublic], int]:
    """Reports newest first, of one environment or endpoint (or all)."""
    statement = select(CheckReport)
    if environment is not None:
        statement = statement.where(col(CheckReport.environment) == environment)
    if endpoint is not None:
        statement = statement.where(col(CheckReport.endpoint) == endpoint)
    count = session.execute(select(func.count()).select_from(statement.subquery())).scalar_one()
    rows = session.execute(
        statement.order_by(col(CheckReport.created_at).desc(), col(CheckReport.id).desc()).limit(
            min(limit, _MAX_LISTED)
        )
    ).scalars()
    return [CheckReportPublic.model_validate(r) for r in rows], count


def get_report(session: Session, report_id: int) -> CheckReportPublic:
    row = session.get(CheckReport, report_id)
    if row is None:
        raise NotFoundError(f"no check report {report_id}; list them with GET /api/checks")
    return CheckReportPublic.model_validate(row)
