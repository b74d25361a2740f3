"""What the gateway counts for each endpoint: sessions, requests, steps, errors, step latency, last activity."""

import statistics
import threading
import time
from collections import deque

__all__ = ["Traffic", "TrafficCounters"]


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

    def latency_ms(self) -> tuple[float | None, float | None]:
        """The step latency's p50 and p95 over the last 2000 steps, in milliseconds."""
        with self._lock:
            latencies = list(self._latencies)
        if len(latencies) >= 2:
            cuts = statistics.quantiles(latencies, n=20, method="inclusive")
            return round(cuts[9], 3), round(cuts[18], 3)
        if latencies:
            return round(latencies[0], 3), round(latencies[0], 3)
        return None, None


class TrafficCounters:
    """Every endpoint's counters in this envhub's gateway."""

    def __init__(self) -> None:
        self._traffic: dict[str, Traffic] = {}
        self._lock = threading.Lock()

    def of(self, endpoint_id: str) -> Traffic:
        with self._lock:
            return self._traffic.setdefault(endpoint_id, Traffic())

    def find(self, endpoint_id: str) -> Traffic | None:
        with self._lock:
            return self._traffic.get(endpoint_id)
