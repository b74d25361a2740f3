"""Registering a self-hosted endpoint by URL: it enters the catalog (`source="url"`) only once its core checks pass."""

import asyncio
from urllib.parse import urlsplit

from sqlalchemy import Engine
from sqlmodel import Session

from catalog.models import EnvironmentDetail
from catalog.store import get_environment, save_registered
from conformance.checker import Checker
from conformance.engine import Outcome
from core.errors import NonConformingError
from core.outbound import OutboundSession
from envclient.health import Probe, probe

__all__ = ["register_url", "url_environment_id"]


def url_environment_id(url: str) -> str:
    """The catalog id of a self-hosted endpoint: url:host:port/path."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    path = parts.path.rstrip("/")
    return f"url:{host}:{port}{path}"


async def register_url(checker: Checker, url: str, *, probe_timeout_s: float = 5) -> tuple[EnvironmentDetail, bool]:
    """Add (or refresh) a self-hosted endpoint once its core checks pass; True when it is new."""
    url = checker.guard.normalize(url)
    environment_id = url_environment_id(url)
    report = await checker.run(url)
    if not report.conforms:
        filed = await asyncio.to_thread(checker.file, report)
        failing = [
            {"id": c.check_id, "title": c.title, "result": c.status.value, "message": c.message}
            for c in report.results
            if c.counts and c.status != Outcome.PASS
        ]
        names = ", ".join(c["id"] for c in failing)
        raise NonConformingError(
            f"{url} is not registered: {len(failing)} core checks did not pass ({names}); "
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
    await asyncio.to_thread(checker.file, report, environment=environment_id)
    with Session(checker.engine) as session:
        return get_environment(session, environment_id), created


def _save_registered(engine: Engine, environment_id: str, url: str, seen: Probe) -> bool:
    with Session(engine) as session:
        created = save_registered(session, environment_id, url, seen)
        session.commit()
    return created
