"""Dataset downloads allowed: so many per request, and per hour to one client, of one dataset and in all."""

import math
import threading
import time
from collections import deque
from dataclasses import dataclass

from core.errors import TooManyRequestsError

__all__ = ["HOUR_S", "Allowance", "Downloads"]

HOUR_S = 3600.0


@dataclass
class Allowance:
    """The downloads one request may still make, and whom they count against."""

    left: int
    client: str | None = None  # a signed-in user or an address (gateway.gate.client_of); None: envhub's own read


@dataclass(frozen=True)
class _Download:
    began: float  # on the monotonic clock
    client: str | None
    dataset: str


class Downloads:
    """The downloads of the last hour, each with its client and dataset. At most `per_hour` are kept, so counting
    one client's or one dataset's is a short walk."""

    def __init__(
        self, *, per_request: int = 20, per_hour: int = 200, per_client_hour: int = 50, per_dataset_hour: int = 100
    ) -> None:
        self.per_request = per_request
        self.per_hour = per_hour
        self.per_client_hour = per_client_hour
        self.per_dataset_hour = per_dataset_hour
        self._lock = threading.Lock()
        self._last_hour: deque[_Download] = deque()

    def allowance(self, client: str | None = None) -> Allowance:
        """What one request (a page of tasksets, an evaluation's rows) by `client` may download."""
        return Allowance(self.per_request, client)

    def draw(self, allowance: Allowance, dataset_id: str) -> None:
        """Count one download of `dataset_id`; TooManyRequestsError, with a code naming the allowance, past any."""
        if allowance.left <= 0:
            raise TooManyRequestsError(
                f"not all of dataset {dataset_id} was read: envhub downloads at most {self.per_request} "
                "dataset files per request (ENVHUB_TASKSET_DOWNLOADS_PER_REQUEST); ask again to read the rest "
                "(the files read so far are kept)",
                code="downloads_per_request",
            )
        with self._lock:
            now = time.monotonic()
            while self._last_hour and now - self._last_hour[0].began >= HOUR_S:
                self._last_hour.popleft()
            # The caller's own allowance first, so that the message is about what they spent when it is theirs.
            mine = [d for d in self._last_hour if d.client == allowance.client] if allowance.client else []
            if len(mine) >= self.per_client_hour:
                raise TooManyRequestsError(
                    f"dataset {dataset_id} was not read: you have had envhub download {self.per_client_hour} dataset "
                    f"files in the last hour (ENVHUB_TASKSET_DOWNLOADS_PER_CLIENT_HOUR); try again in "
                    f"{_minutes_left(mine[0], now)} min",
                    code="client_downloads_per_hour",
                )
            its = [d for d in self._last_hour if d.dataset == dataset_id]
            if len(its) >= self.per_dataset_hour:
                raise TooManyRequestsError(
                    f"dataset {dataset_id} was not read: envhub has downloaded {self.per_dataset_hour} of its files "
                    f"in the last hour (ENVHUB_TASKSET_DOWNLOADS_PER_DATASET_HOUR); try again in "
                    f"{_minutes_left(its[0], now)} min",
                    code="dataset_downloads_per_hour",
                )
            if len(self._last_hour) >= self.per_hour:
                raise TooManyRequestsError(
                    f"dataset {dataset_id} was not read: envhub has downloaded {self.per_hour} dataset "
                    f"files in the last hour (ENVHUB_TASKSET_DOWNLOADS_PER_HOUR); try again in "
                    f"{_minutes_left(self._last_hour[0], now)} min",
                    code="downloads_per_hour",
                )
            self._last_hour.append(_Download(now, allowance.client, dataset_id))
        allowance.left -= 1


def _minutes_left(oldest: _Download, now: float) -> int:
    """When the oldest download counted leaves the hour, in whole minutes."""
    return math.ceil((HOUR_S - (now - oldest.began)) / 60)
