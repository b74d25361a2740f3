"""Conformance in the catalog: checks run on request, their reports filed under environments and endpoints.

Also registering a self-hosted endpoint by URL: it enters the catalog (`source="url"`)
only once its core checks pass.
"""

import asyncio
from urllib.parse import urlsplit

from sqlalchemy import Engine, func, select
from sqlmodel import Session, col

from catalog.checks import ConformanceReport, check_url
from catalog.health import record
from catalog.models import (
    CheckReport,
    CheckReportPublic,
    Endpoint,
    Environment,
    EnvironmentDetail,
    Source,
)
from catalog.search import get_environment
from catalog.store import interface_columns
from core.clock import utcnow
from core.errors import InvalidInputError, NonConformingError, NotFoundError, TooManyRequestsError
from core.outbound import OutboundGuard, OutboundSession
from protocol.health import Probe, probe

_MAX_LISTED = 50


def url_environment_id(url: str) -> str:
    """The catalog id of a self-hosted endpoint: url:host:port/path."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    path = parts.path.rstrip("/")
    return f"url:{host}:{port}{path}"


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
        """The Hub Space or registered URL the catalog knows at this address."""
        statement = select(col(Environment.id)).where(
            col(Environment.host).in_([url, url + "/"]), col(Environment.source).in_([Source.HUB, Source.URL])
        )
        with Session(self.engine) as session:
            return session.execute(statement.limit(1)).scalars().first()

    def file(self, report: ConformanceReport, environment: str | None, endpoint: str | None) -> CheckReportPublic:
        """Store a report, and its summary on the environment and endpoint it belongs to."""
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
            summary = report.summary(row.id).model_dump(mode="json")
            if environment is not None:
                env_row = session.get(Environment, environment)
                if env_row is not None:
                    env_row.conformance = summary
                    session.add(env_row)
            if endpoint is not None:
                endpoint_row = session.get(Endpoint, endpoint)
                if endpoint_row is not None:
                    endpoint_row.conformance = summary
                    session.add(endpoint_row)
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


async def register_url(checker: Checker, url: str, *, probe_timeout_s: float = 5) -> tuple[EnvironmentDetail, bool]:
    """Add (or refresh) a self-hosted endpoint once its core checks pass; True when it is new."""
    url = checker.guard.normalize(url)
    environment_id = url_environment_id(url)
    report = await checker.run(url)
    if not report.conforms:
        filed = await asyncio.to_thread(checker.file, report, None, None)
        names = ", ".join(report.failing)
        failing = [
            {"id": c.id, "title": c.title, "result": c.result.value, "message": c.message}
            for c in report.checks
            if c.id in report.failing
        ]
        raise NonConformingError(
            f"{url} is not registered: {len(report.failing)} core checks did not pass ({names}); "
            f"see GET /api/checks/{filed.id}",
            failing,
            filed.id,
        )
    outbound = OutboundSession(checker.guard, timeout_s=probe_timeout_s)
    try:
        seen = await probe(url, outbound, with_interface=True)
    finally:
        await outbound.aclose()
    created = await asyncio.to_thread(_save_registered, checker.engine, environment_id, url, seen)
    await asyncio.to_thread(checker.file, report, environment_id, None)
    with Session(checker.engine) as session:
        return get_environment(session, environment_id), created


def _save_registered(engine: Engine, environment_id: str, url: str, seen: Probe) -> bool:
    cache = interface_columns(seen.interface) if seen.interface is not None else {}
    metadata = cache.get("env_metadata") or {}
    name = str(metadata["name"]) if isinstance(metadata.get("name"), str) else None
    description = str(metadata["description"]) if isinstance(metadata.get("description"), str) else ""
    parts = urlsplit(url)
    with Session(engine) as session:
        row = session.get(Environment, environment_id)
        created = row is None
        if row is None:
            row = Environment(id=environment_id, source=Source.URL, title=name or parts.netloc)
        elif row.source != Source.URL:
            raise InvalidInputError(f"{environment_id} is already in the catalog as a {row.source.value} environment")
        row.title = (name or row.title)[:200]
        row.description = description[:2000]
        row.host = url
        row.author = None
        row.removed_at = None
        row.indexed_at = utcnow()
        for column, value in cache.items():
            setattr(row, column, value)
        row.health = record(row.health, seen)
        session.add(row)
        session.commit()
    return created
