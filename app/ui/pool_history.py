"""A pool's sessions and replicas over time, as this envhub's page saw them: a sample each time the page draws the
pool (every second or two while the Launch tab follows the endpoint), the last ten minutes kept in memory."""

import time
from collections import deque

from app.ui.charts import lines_over_time
from hosting.models import PoolPublic, ReplicaStatus

KEEP_S = 600


class PoolHistory:
    def __init__(self) -> None:
        self._samples: dict[str, deque[tuple[float, int, int]]] = {}

    def note(self, endpoint_id: str, pool: PoolPublic) -> None:
        ready = sum(r.status == ReplicaStatus.READY for r in pool.replicas)
        samples = self._samples.setdefault(endpoint_id, deque())
        now = time.monotonic()
        samples.append((now, pool.sessions, ready))
        while samples and samples[0][0] < now - KEEP_S:
            samples.popleft()

    def chart(self, endpoint_id: str) -> str:
        """Sessions and ready replicas over the samples kept; empty until there are two."""
        samples = list(self._samples.get(endpoint_id, ()))
        if len(samples) < 2:
            return ""
        now = samples[-1][0]
        return lines_over_time(
            {
                "sessions": [(t - now, float(s)) for t, s, _ in samples],
                "replicas": [(t - now, float(r)) for t, _, r in samples],
            },
            "the pool's sessions and ready replicas over time",
        )


HISTORY = PoolHistory()  # this process's page, every tab: endpoint ids are unique
