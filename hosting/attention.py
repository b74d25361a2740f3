"""Endpoints the gateway asked to have looked at soon: sized (sessions wait) or checked (a replica did not answer)."""

import threading

__all__ = ["Attention"]


class Attention:
    """A mailbox between the gateway's side, which notes endpoints, and the keeper, which takes and tends them.

    Noting never blocks: the gateway notes on its event loop, and the keeper's own thread waits here.
    """

    def __init__(self) -> None:
        self._due: dict[str, bool] = {}  # endpoint -> whether to look for dead replicas first, not only to size it
        self._ready = threading.Condition()
        self._closed = False

    def size_soon(self, endpoint_id: str) -> None:
        """Sessions wait, or the pool is nearly full."""
        with self._ready:
            self._due.setdefault(endpoint_id, False)
            self._ready.notify()

    def check_soon(self, endpoint_id: str) -> None:
        """A replica of the endpoint failed to answer: find out whether it died."""
        with self._ready:
            self._due[endpoint_id] = True
            self._ready.notify()

    def take(self, timeout_s: float) -> dict[str, bool]:
        """What was noted since the last take (endpoint -> check first), waiting up to `timeout_s` for some; at once,
        and nothing, once closed."""
        with self._ready:
            self._ready.wait_for(lambda: bool(self._due) or self._closed, timeout_s)
            due, self._due = ({}, {}) if self._closed else (self._due, {})
        return due

    def close(self) -> None:
        """The keeper stops: whoever waits in take() returns now, not at its timeout."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
