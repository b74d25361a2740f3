"""Each endpoint's gateway traffic as hosting keeps it: its figures for the API, and its last activity written to its
row, so that a session through any envhub keeps the endpoint from being stopped as idle."""

from datetime import UTC, datetime

from sqlalchemy import Engine, update
from sqlmodel import Session, col

from core.clock import as_utc
from gateway.traffic import Traffic, TrafficCounters
from hosting.models import Endpoint, EndpointStats

__all__ = ["TrafficBook"]


class TrafficBook:
    """Every endpoint's counters on this instance, and when its gateway last carried each one's traffic.

    The last activity is written to the endpoint's row every few seconds (write_activity), so
    that a session through this instance's gateway keeps the endpoint from being stopped as
    idle by the instance that manages it.
    """

    def __init__(self, engine: Engine, counters: TrafficCounters | None = None) -> None:
        self.engine = engine
        self.counters = counters or TrafficCounters()
        self._written: dict[str, float] = {}  # endpoint id -> the last_active time written to its row

    def of(self, endpoint_id: str) -> Traffic:
        return self.counters.of(endpoint_id)

    def stats(self, endpoint: Endpoint) -> EndpointStats:
        """This instance's counters; the last activity any instance saw, as written to the row."""
        traffic = self.of(endpoint.id)
        p50, p95 = traffic.latency_ms()
        stats = EndpointStats(
            active_sessions=traffic.active_sessions,
            sessions=traffic.sessions,
            requests=traffic.requests,
            steps=traffic.steps,
            errors=traffic.errors,
            step_p50_ms=p50,
            step_p95_ms=p95,
            last_active_at=datetime.fromtimestamp(traffic.last_active, UTC) if traffic.last_active else None,
        )
        if endpoint.last_active_at is not None:
            row_active = as_utc(endpoint.last_active_at)
            stats.last_active_at = max(stats.last_active_at or row_active, row_active)
        return stats

    def write_activity(self, endpoint_ids: list[str]) -> None:
        """Write when this instance's gateway last carried each endpoint's traffic, for the instance managing it."""
        for endpoint_id in endpoint_ids:
            traffic = self.counters.find(endpoint_id)
            if traffic is None:
                continue
            if traffic.active_sessions > 0:
                traffic.touch()  # an open session is activity, however quiet
            if traffic.last_active <= self._written.get(endpoint_id, 0):
                continue
            when = datetime.fromtimestamp(traffic.last_active, UTC)
            with Session(self.engine) as session, session.begin():
                session.execute(
                    update(Endpoint)
                    .where(
                        col(Endpoint.id) == endpoint_id,
                        col(Endpoint.last_active_at).is_(None) | (col(Endpoint.last_active_at) < when),
                    )
                    .values(last_active_at=when)
                )
            self._written[endpoint_id] = traffic.last_active
