"""What the gateway counts for each endpoint: sessions, requests, steps, errors, step latency."""

import statistics
import threading
import time
from collections import deque
from datetime import UTC, datetime

from hosting.models import EndpointStats


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
