"""What the gateway counts for each endpoint: sessions, requests, steps, errors, step latency, last activity."""

import statistics
import threading
import time
from collections import deque
from datetime import UTC, datetime

from sqlalchemy import Engine, update
from sqlmodel import Session, col

from core.clock import as_utc
from hosting.models import Endpoint, EndpointStats


class Traffic:
    """Gateway counters for one endpoint, kept in memory; cheap on the per-frame path."""

    def __init__(self) -> None:
        self.active_sessions = 0
        self.sessions = 0
        self.requests = 0
        self.steps = 0
        self.errors = 0
        self.last_active = 0.0  # time.time(); 0 until the first use
        self._latencies: deque[float] = deque(maxlen=2000)
        self._lock = threading.Lock()

    def touch(self) -> None:
        self.last_active = time.time()

    def session_opened(self) -> None:
        with self._lock:
            self.active_sessions += 1
            self.sessions += 1
        self.touch()

    def session_closed(self) -> None:
        with self._lock:
            self.active_sessions -= 1
        self.touch()

    def request(self, failed: bool = False) -> None:
        self.requests += 1
        self.errors += failed
        self.touch()

    def step(self, seconds: float, failed: bool = False) -> None:
        self.steps += 1
        self.errors += failed
        self._latencies.append(seconds * 1000)
        self.last_active = time.time()

    def snapshot(self) -> EndpointStats:
        with self._lock:
            latencies = list(self._latencies)
        stats = EndpointStats(
            active_sessions=self.active_sessions,
            sessions=self.sessions,
            requests=self.requests,
            steps=self.steps,
            errors=self.errors,
            last_active_at=datetime.fromtimestamp(self.last_active, UTC) if self.last_active else None,
        )
        if len(latencies) >= 2:
            cuts = statistics.quantiles(latencies, n=20, method="inclusive")
            stats.step_p50_ms, stats.step_p95_ms = round(cuts[9], 3), round(cuts[18], 3)
        elif latencies:
            stats.step_p50_ms = stats.step_p95_ms = round(latencies[0], 3)
        return stats


class TrafficBook:
    """Every endpoint's counters on this replica, and when its gateway last carried each one's traffic.

    The last activity is written to the endpoint's row every few seconds (write_activity), so
    that a session through this replica's gateway keeps the endpoint from being stopped as
    idle by the replica that manages it.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._traffic: dict[str, Traffic] = {}
        self._written: dict[str, float] = {}  # endpoint id -> the last_active time written to its row
        self._lock = threading.Lock()

    def of(self, endpoint_id: str) -> Traffic:
        with self._lock:
            return self._traffic.setdefault(endpoint_id, Traffic())

    def stats(self, endpoint: Endpoint) -> EndpointStats:
        """This replica's counters; the last activity any replica saw, as written to the row."""
        stats = self.of(endpoint.id).snapshot()
        if endpoint.last_active_at is not None:
            row_active = as_utc(endpoint.last_active_at)
            stats.last_active_at = max(stats.last_active_at or row_active, row_active)
        return stats

    def write_activity(self, endpoint_ids: list[str]) -> None:
        """Write when this replica's gateway last carried each endpoint's traffic, for the replica managing it."""
        for endpoint_id in endpoint_ids:
            with self._lock:
                traffic = self._traffic.get(endpoint_id)
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
