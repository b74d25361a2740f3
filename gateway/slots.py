"""A replica's slots as a pool hands them out, who a session counts against, and why a full pool refused."""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HeldFull", "PoolFull", "QueueFull", "Slot", "Upstream", "Waiter", "user_client"]


@dataclass(frozen=True)
class Upstream:
    """Where the gateway reaches one replica's server, and what it adds to reach it."""

    url: str
    headers: dict[str, str]
    root_path: str = ""  # the server's ASGI root_path, when its backend set it: the gateway path


@dataclass(eq=False)
class Slot:
    """A replica as the gateway routes to it."""

    id: str
    upstream: Upstream
    capacity: int = 1
    said: bool = False  # whether the capacity is the server's (or the launch's) word, not the default
    sessions: int = 0
    active: int = 0  # of its sessions, those that sent the server something
    accepting: bool = True  # ready; not draining or unhealthy
    idle_since: float = field(default_factory=time.monotonic)  # monotonic time its sessions last went to 0
    lost: str | None = None  # why its sessions were lost, once they were
    _losses: list[Callable[[str], None]] = field(default_factory=list)
    _heard: dict[int, Callable[[], float]] = field(default_factory=dict)  # its sessions' last word from it

    @property
    def free(self) -> int:
        return self.capacity - self.sessions

    def hearing(self, session: int, heard: Callable[[], float]) -> Callable[[], None]:
        """Keep, while a session runs on this replica, when it last heard the replica (monotonic time); the
        returned function forgets it. A replica that answers its sessions is busy, not hung."""
        self._heard[session] = heard

        def forget() -> None:
            self._heard.pop(session, None)

        return forget

    def last_heard(self) -> float | None:
        """When any session of this replica last heard from it (monotonic), if one runs."""
        return max((heard() for heard in list(self._heard.values())), default=None)


class PoolFull(Exception):
    """Every slot stayed taken while the session waited."""

    limit = "queue_s"  # which limit refused it, named as its setting ENVHUB_POOL_<LIMIT>, for clients to tell

    def __init__(self, sessions: int, capacity: int, replicas: int, most: int, waited_s: float) -> None:
        self.sessions, self.capacity, self.replicas, self.most, self.waited_s = (
            sessions, capacity, replicas, most, waited_s
        )  # fmt: skip
        super().__init__(self.message)

    @property
    def message(self) -> str:
        grow = (
            f"it is at its most replicas ({self.most}); launch it with a larger replicas max"
            if self.replicas >= self.most
            else "it is still growing; try again shortly"
        )
        return (
            f"the pool is full: {self.sessions}/{self.capacity} sessions on {self.replicas} replicas, "
            f"and no slot freed in {self.waited_s:g} s; {grow}, or open fewer sessions at once"
        )

    @property
    def facts(self) -> dict[str, Any]:
        """What a refusal's data says beside the sessions it counts: the limit, and the numbers behind it."""
        return {"limit": self.limit, "replicas": self.replicas, "max_replicas": self.most, "waited_s": self.waited_s}


class QueueFull(PoolFull):
    """The session may not even wait: the pool's queue, or the client's share of it, is full."""

    def __init__(self, sessions: int, capacity: int, replicas: int, most: int, limit: str, waiting: int) -> None:
        self.limit, self.waiting = limit, waiting  # queue_max or queue_per_client; the sessions that wait for it
        super().__init__(sessions, capacity, replicas, most, 0)

    @property
    def why(self) -> str:
        if self.limit == "queue_per_client":
            return f"{self.waiting} of your sessions wait already, the most one client may have waiting"
        return f"{self.waiting} sessions wait already, the most its queue holds"

    @property
    def message(self) -> str:
        return (
            f"the pool is full: {self.sessions}/{self.capacity} sessions on {self.replicas} replicas, and {self.why}; "
            "open fewer sessions at once, or launch the endpoint with a larger replicas max"
        )

    @property
    def facts(self) -> dict[str, Any]:
        return {"limit": self.limit, "replicas": self.replicas, "max_replicas": self.most, "waiting": self.waiting}


class HeldFull(PoolFull):
    """The client holds as many sessions on the endpoint as one client may: its numbers, not the pool's."""

    limit = "sessions_per_client"

    def __init__(self, endpoint_id: str, held: int, most: int) -> None:
        self.endpoint_id = endpoint_id
        super().__init__(held, most, 0, 0, 0)

    @property
    def message(self) -> str:
        return (
            f"you hold {self.sessions} sessions on endpoint {self.endpoint_id}, the most one client may hold on a "
            "public endpoint (ENVHUB_POOL_SESSIONS_PER_CLIENT); close one first, or launch an endpoint of your own"
        )

    @property
    def facts(self) -> dict[str, Any]:
        return {"limit": self.limit}


def user_client(name: str) -> str:
    """Whom a signed-in user's sessions count against (anyone else's count against their address)."""
    return f"user:{name}"


@dataclass(eq=False)
class Waiter:
    """A session waiting for a slot: whose it is (a user, else an address), and whether it has sent anything yet."""

    client: str = ""
    active: bool = False
