"""Checks run on request, a few at a time, and their reports: filed under environments and endpoints, and read.

Every lane shares the limit and the table: the protocol checklist (conformance), the hub lane's quality reports
(conformance.quality, which also read what the catalog holds of the environment: manifest, README, sha) and the
statistical lane; `Checker.file` files any lane's `Report`.
"""

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace

from sqlalchemy import Engine, func, select
from sqlmodel import Session, col

from catalog.models import Environment
from catalog.store import environment_at, note_conformance, note_quality
from conformance import ServerCapacity, check_url
from conformance.models import CheckReport, CheckReportPublic, FiledReport, Suite, public
from conformance.quality import QualityTarget, ReplicaTarget, Seats, check_quality
from conformance.report import Report
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
        quality_deadline_s: float = 60,
        max_running: int = 4,
    ) -> None:
        self.engine = engine
        self.guard = guard
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s
        self.quality_deadline_s = quality_deadline_s
        self.max_running = max_running
        self._running = 0

    @asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        if self._running >= self.max_running:
            raise TooManyRequestsError(
                f"{self._running} checks are running, the most this server runs at once; try again in a minute",
                code="checks_at_once",
            )
        self._running += 1
        try:
            yield
        finally:
            self._running -= 1

    async def run(
        self,
        url: str,
        *,
        trusted: tuple[str, ...] = (),
        credentials: dict[str, str] | None = None,
        server_capacity: ServerCapacity | None = None,
    ) -> Report:
        """Check a URL without filing the report; `credentials` go to the trusted prefixes only."""
        async with self._slot():
            guard = self.guard.with_trusted(*trusted, credentials=credentials) if trusted else self.guard
            return await check_url(
                url, guard, timeout_s=self.timeout_s, deadline_s=self.deadline_s, server_capacity=server_capacity
            )

    async def check(
        self,
        url: str,
        *,
        environment: str | None = None,
        endpoint: str | None = None,
        trusted: tuple[str, ...] = (),
        credentials: dict[str, str] | None = None,
        server_capacity: ServerCapacity | None = None,
    ) -> CheckReportPublic:
        """Check a URL and file the report under its environment (found by host when not given) and endpoint."""
        url = self.guard.normalize(url)
        if environment is None:
            environment = await asyncio.to_thread(self._environment_at, url)
        report = await self.run(url, trusted=trusted, credentials=credentials, server_capacity=server_capacity)
        return await asyncio.to_thread(self.file, report, environment=environment, endpoint=endpoint)

    def _environment_at(self, url: str) -> str | None:
        with Session(self.engine) as session:
            return environment_at(session, url)

    def file(
        self,
        report: Report,
        *,
        environment: str | None = None,
        endpoint: str | None = None,
        report_id: int | None = None,
    ) -> CheckReportPublic:
        """Store a report of any lane under the environment (the report's own when not given) and endpoint it
        belongs to, and its summary on the environment (the protocol's and the quality one's). `report_id` files it
        again over the row it was first filed in (a run filed `running`, now ended).

        An endpoint's row is hosting's to write: it takes the summary from the filed report.
        """
        environment = environment or report.environment
        if environment != report.environment:
            report = report.model_copy(update={"environment": environment})
        protocol = report.suite == Suite.PROTOCOL
        values = {
            "url": report.target,
            "environment": environment,
            "endpoint": endpoint,
            "revision": report.revision,
            "created_at": report.checked_at,
            "seconds": report.duration_s,
            "verdict": report.verdict.value if report.verdict is not None else None,
            "suite": report.suite.value,
            "conforms": protocol and report.conforms,
            "core_passed": report.core_passed if protocol else 0,
            "core_total": report.core_total if protocol else 0,
            "report": report.model_dump(mode="json"),
        }
        with Session(self.engine) as session:
            row = session.get(CheckReport, report_id) if report_id is not None else None
            if report_id is not None and row is None:
                raise NotFoundError(f"no check report {report_id} to file again")
            row = (row or CheckReport(url=report.target)).sqlmodel_update(values)
            session.add(row)
            session.flush()
            assert row.id is not None
            if environment is not None and protocol:
                note_conformance(session, environment, report.conformance_summary(row.id))
            elif environment is not None and report.suite == Suite.QUALITY:
                note_quality(session, environment, report.quality_summary(row.id))
            session.commit()
            session.refresh(row)
            return CheckReportPublic.model_validate(row)

    async def check_quality(
        self,
        url: str,
        *,
        environment: str | None = None,
        endpoint: str | None = None,
        revision: str | None = None,
        trusted: tuple[str, ...] = (),
        credentials: dict[str, str] | None = None,
        replicas: tuple[ReplicaTarget, ...] | None = None,
        cold_start_s: float | None = None,
        memory: Callable[[], int | None] | None = None,
        server_capacity: ServerCapacity | None = None,
        seats: Seats | None = None,
        replica: str | None = None,
    ) -> CheckReportPublic:
        """Run a quality report of a URL and file it under its environment (found by host when not given) and
        endpoint; the revision, replicas, cold start, memory and seats are what hosting knows of an endpoint (the
        revision by default the catalog's). SlotsInUseError, nothing filed, when the seats gave way to clients."""
        url = self.guard.normalize(url)
        if environment is None:
            environment = await asyncio.to_thread(self._environment_at, url)
        known = await asyncio.to_thread(self._target, url, environment)
        target = replace(
            known,
            revision=revision or known.revision,
            replicas=replicas,
            cold_start_s=cold_start_s,
            memory=memory,
            server_capacity=server_capacity,
            seats=seats,
            replica=replica,
        )
        async with self._slot():
            guard = self.guard.with_trusted(*trusted, credentials=credentials).with_trusted(
                *(r.url for r in replicas or ())
            )
            report = await check_quality(target, guard, timeout_s=self.timeout_s, deadline_s=self.quality_deadline_s)
        return await asyncio.to_thread(self.file, report, endpoint=endpoint)

    def _target(self, url: str, environment: str | None) -> QualityTarget:
        """What the catalog declares of the environment at this URL: its manifest, README and revision."""
        with Session(self.engine) as session:
            row = session.get(Environment, environment) if environment is not None else None
        if row is None:
            return QualityTarget(url, environment)
        return QualityTarget(url, environment, row.sha, row.manifest, row.readme or None)

    def reported_revisions(self, environments: list[str]) -> set[tuple[str, str]]:
        """(environment, revision) pairs of these environments that have a quality report filed."""
        statement = select(col(CheckReport.environment), col(CheckReport.revision)).where(
            col(CheckReport.suite) == Suite.QUALITY.value,
            col(CheckReport.environment).in_(environments),
            col(CheckReport.revision).is_not(None),
        )
        with Session(self.engine) as session:
            return {(str(e), str(r)) for e, r in session.execute(statement.distinct())}


def list_reports(
    session: Session,
    *,
    environment: str | None = None,
    endpoint: str | None = None,
    suite: Suite | None = None,
    limit: int = 10,
) -> tuple[list[FiledReport], int]:
    """Reports newest first, of one environment or endpoint (or all), of one suite (or both)."""
    statement = select(CheckReport)
    if suite is not None:
        statement = statement.where(col(CheckReport.suite) == suite.value)
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
    return [public(r) for r in rows], count


def get_report(session: Session, report_id: int) -> FiledReport:
    row = session.get(CheckReport, report_id)
    if row is None:
        raise NotFoundError(f"no check report {report_id}; list them with GET /api/checks")
    return public(row)
