"""Hosted endpoints: launching environments on a backend, tracking them, stopping them.

An endpoint row is the truth users see; the backend is asked what actually runs at
start-up (reconcile) and every few seconds after (watch), so neither drifts.
"""

import logging
import re
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy import ColumnElement, Engine, func, select, update
from sqlmodel import Session, col

from catalog.models import ConformanceSummary
from catalog.runtimes import LaunchSpec, Runtime, death_note
from catalog.store import find_environment
from catalog.traffic import Traffic
from core.callers import Access, Caller
from core.clock import as_utc, utcnow
from core.db import exclusive
from core.errors import EnvhubError, InvalidInputError, LaunchError, NotFoundError, TooManyRequestsError
from core.leases import Leases
from hosting.models import Backend, Endpoint, EndpointStatus

log = logging.getLogger(__name__)

ACTIVE = (EndpointStatus.STARTING, EndpointStatus.RUNNING)
# How long the gateway trusts a looked-up internal URL: the watch interval, so that an
# endpoint stopped through another replica is not reached at its old address for long.
_RESOLVE_TTL_S = 2.0
GATEWAY_PREFIX = "/endpoints"  # an endpoint's gateway URL is <envhub>/endpoints/<id> (app/gateway.py)
LIMITS_LOCK = 0x656E76687563  # the advisory lock (core.db.exclusive) under which launches count endpoints
OPEN = Access(sign_in=False, anonymous_launch=True)  # no sign-in: anyone launches, and stops what nobody owns
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


# Variables that decide how the interpreter or the dynamic loader start the server (what it runs, which
# libraries it loads): envhub sets the server's PATH and PYTHONPATH itself, and nothing else may.
_LOADER_PREFIXES = ("LD_", "DYLD_", "PYTHON")
ALLOWED_PYTHON_VARIABLES = frozenset(
    {"PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONWARNINGS", "PYTHONFAULTHANDLER"}
)


def starts_the_interpreter(name: str) -> bool:
    """Whether a launch variable would change how the server's interpreter or loader starts."""
    upper = name.upper()
    return upper == "PATH" or (upper.startswith(_LOADER_PREFIXES) and upper not in ALLOWED_PYTHON_VARIABLES)


class LaunchOptions(BaseModel):
    """What every backend accepts, plus the backend's own options (extra keys)."""

    model_config = ConfigDict(extra="allow")

    env: dict[str, str] = Field(
        default_factory=dict, description="variables for the server, e.g. OPENENV_MODE, ENABLE_WEB_INTERFACE"
    )
    secrets: dict[str, str] = Field(default_factory=dict, description="passed to the server, never stored or shown")

    @field_validator("env", "secrets")
    @classmethod
    def _names_and_sizes(cls, value: dict[str, str]) -> dict[str, str]:
        for name, content in value.items():
            if not _VARIABLE_NAME.match(name):
                raise ValueError(f"{name!r} is not a valid environment variable name")
            if len(content) > 16_384:
                raise ValueError(f"the value of {name} is over 16 KiB")
        refused = sorted(name for name in value if starts_the_interpreter(name))
        if refused:
            raise ValueError(
                f"{', '.join(refused)} would change how the server's interpreter or loader starts, which envhub "
                f"sets itself; of the PYTHON* variables only {', '.join(sorted(ALLOWED_PYTHON_VARIABLES))} may be set"
            )
        mode = value.get("OPENENV_MODE")
        if mode is not None and mode not in ("simulation", "production"):
            raise ValueError("OPENENV_MODE must be simulation or production")
        return value


class LaunchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    environment: str = Field(description="an environment id from the catalog")
    backend: Backend = Backend.PROCESS
    options: LaunchOptions = Field(default_factory=LaunchOptions)


@dataclass(frozen=True)
class Upstream:
    url: str
    headers: dict[str, str]
    root_path: str = ""  # the server's ASGI root_path, when its backend set it: the gateway prefix


@dataclass(frozen=True)
class EndpointLimits:
    total: int = 20
    per_owner: int = 5
    idle_timeout_s: float = 1800


class EndpointManager:
    """Endpoints of one replica: it launches, watches and stops its own, and serves any through its gateway.

    Replicas sharing a database each manage the endpoints they launched (the row's
    `replica`): a process endpoint runs on that replica's machine. One replica never
    stops or fails another live replica's endpoints; those of a replica that died are
    taken over (kept when they still run, as containers and Spaces do) or stopped.
    """

    def __init__(
        self,
        engine: Engine,
        runtimes: dict[Backend, Runtime],
        logs_dir: Path,
        limits: EndpointLimits,
        leases: Leases | None = None,
        access: Access = OPEN,
    ) -> None:
        self.engine = engine
        self.access = access
        self.runtimes = runtimes
        self.logs_dir = logs_dir
        self.limits = limits
        self.leases = leases or Leases(engine)
        # Where the gateway reaches each endpoint, for a moment: another replica may stop it.
        self._urls: dict[str, tuple[Upstream, float]] = {}
        self._active_written: dict[str, float] = {}  # endpoint id -> the last_active time written to its row
        self._traffic: dict[str, Traffic] = {}
        self._swept_for: set[str] = set()  # the live replicas when spares were last swept
        self._lock = threading.Lock()

    # -- reading

    def get(self, endpoint_id: str) -> Endpoint:
        with Session(self.engine) as session:
            endpoint = session.get(Endpoint, endpoint_id)
        if endpoint is None:
            raise NotFoundError(f"no endpoint {endpoint_id!r}; list them with GET /api/endpoints")
        return endpoint

    def list(self, *, owner: str | None = None, active_only: bool = False) -> list[Endpoint]:
        statement = select(Endpoint).order_by(col(Endpoint.created_at).desc())
        if owner is not None:
            statement = statement.where(col(Endpoint.owner) == owner)
        if active_only:
            statement = statement.where(col(Endpoint.status).in_(ACTIVE))
        with Session(self.engine) as session:
            return list(session.execute(statement).scalars())

    def traffic(self, endpoint_id: str) -> Traffic:
        with self._lock:
            return self._traffic.setdefault(endpoint_id, Traffic())

    def log_path(self, endpoint_id: str) -> Path:
        return self.logs_dir / f"{endpoint_id}.log"

    def resolve(self, endpoint_id: str) -> Upstream | None:
        """Where the gateway reaches a running endpoint; None when it is not running."""
        cached = self._urls.get(endpoint_id)
        if cached is not None and time.monotonic() - cached[1] < _RESOLVE_TTL_S:
            return cached[0]
        with Session(self.engine) as session:
            endpoint = session.get(Endpoint, endpoint_id)
        if endpoint is None or endpoint.status != EndpointStatus.RUNNING or not endpoint.internal_url:
            return None
        return self._remember(endpoint.id, endpoint.backend, endpoint.internal_url, endpoint.handle)

    def _remember(self, endpoint_id: str, backend: Backend, url: str, handle: dict[str, Any]) -> Upstream:
        upstream = Upstream(url, self.runtimes[backend].auth_headers(handle), str(handle.get("root_path") or ""))
        self._urls[endpoint_id] = (upstream, time.monotonic())
        return upstream

    # -- changing

    def launch(self, request: LaunchRequest, caller: Caller) -> Endpoint:
        """The one way to launch: check who asks and the request, record the endpoint as the caller's,
        starting, and start it in the background.

        A signed-in caller owns it, and the space backend creates the Space with their Hub token, in their namespace.
        """
        self.access.ensure_may_launch(caller)
        owner, token = caller.name, caller.token
        with Session(self.engine) as session:
            environment = find_environment(session, request.environment)
        if environment is None:
            raise InvalidInputError(
                f"no environment {request.environment!r} in the catalog; search GET /api/environments"
            )
        if environment.removed_at is not None:
            raise InvalidInputError(f"{environment.id} was removed from the Hub and cannot be launched")
        runtime = self.runtimes.get(request.backend)
        if runtime is None:
            raise InvalidInputError(f"the {request.backend.value} backend is not available on this server")
        extra = dict(request.options.model_extra or {})
        checked = runtime.check(environment, extra, token)
        endpoint = Endpoint(
            id=secrets.token_hex(5),
            environment=environment.id,
            backend=request.backend,
            owner=owner,
            options={"env": request.options.env, "secrets": sorted(request.options.secrets), **checked},
            message="starting",
            replica=self.leases.replica,
        )
        endpoint.log_path = str(self.log_path(endpoint.id))
        # Counted and written under one lock with every replica, so that launches at once keep the limits.
        with self._lock, exclusive(self.engine, LIMITS_LOCK) as connection, Session(bind=connection) as session:
            self._check_limits(session, owner)
            session.add(endpoint)
            session.flush()
        endpoint = self.get(endpoint.id)
        spec = LaunchSpec(
            endpoint_id=endpoint.id,
            environment=environment,
            log_path=self.log_path(endpoint.id),
            env=request.options.env | request.options.secrets,
            options=checked,
            token=token,
            root_path=f"{GATEWAY_PREFIX}/{endpoint.id}",
        )
        threading.Thread(target=self._start, args=(runtime, spec), name=f"launch-{endpoint.id}", daemon=True).start()
        return endpoint

    def _check_limits(self, session: Session, owner: str | None) -> None:
        active = select(func.count()).select_from(Endpoint).where(col(Endpoint.status).in_(ACTIVE))
        if session.execute(active).scalar_one() >= self.limits.total:
            raise TooManyRequestsError(f"this server runs at most {self.limits.total} endpoints; stop one first")
        mine = active.where(col(Endpoint.owner).is_(None) if owner is None else col(Endpoint.owner) == owner)
        if session.execute(mine).scalar_one() >= self.limits.per_owner:
            raise TooManyRequestsError(
                f"you have {self.limits.per_owner} endpoints running, the most allowed; "
                "stop one with DELETE /api/endpoints/{id}"
            )

    def _update(self, endpoint_id: str, **values: Any) -> Endpoint | None:
        with Session(self.engine) as session:
            endpoint = session.get(Endpoint, endpoint_id)
            if endpoint is None:
                return None
            endpoint.sqlmodel_update(values)
            session.add(endpoint)
            session.commit()
            session.refresh(endpoint)
            return endpoint

    def note_conformance(self, endpoint_id: str, summary: ConformanceSummary) -> None:
        """The summary of the endpoint's last conformance check, on its row."""
        self._update(endpoint_id, conformance=summary.model_dump(mode="json"))

    def _note(self, endpoint_id: str, message: str) -> None:
        self._update(endpoint_id, message=message)

    def _start(self, runtime: Runtime, spec: LaunchSpec) -> None:
        try:
            launched = runtime.start(spec, lambda message: self._note(spec.endpoint_id, message))
        except LaunchError as exc:
            self._update(spec.endpoint_id, status=EndpointStatus.FAILED, message=exc.message, stopped_at=utcnow())
            return
        except Exception as exc:
            log.exception("launching %s failed", spec.endpoint_id)
            message = f"launch failed unexpectedly: {type(exc).__name__}: {exc}"
            self._update(spec.endpoint_id, status=EndpointStatus.FAILED, message=message, stopped_at=utcnow())
            return
        current = self._update(spec.endpoint_id)
        if current is None or current.status != EndpointStatus.STARTING:
            runtime.stop(launched.handle)  # stopped while it was starting
            return
        self.traffic(spec.endpoint_id).touch()
        self._remember(spec.endpoint_id, runtime.name, launched.url, launched.handle)
        self._update(
            spec.endpoint_id,
            status=EndpointStatus.RUNNING,
            message="running",
            internal_url=launched.url,
            handle=launched.handle,
            started_at=utcnow(),
        )

    def stop(self, endpoint_id: str, caller: Caller) -> Endpoint:
        """Stop an endpoint on request: its owner or the admin may (see Access for one nobody owns)."""
        endpoint = self.get(endpoint_id)
        self.access.ensure_may_stop(caller, endpoint_id, endpoint.owner)
        return self._stop(endpoint_id, "stopped on request")

    def _stop(self, endpoint_id: str, reason: str) -> Endpoint:
        endpoint = self.get(endpoint_id)
        if endpoint.status in (EndpointStatus.STOPPED, EndpointStatus.FAILED):
            return endpoint
        self._urls.pop(endpoint_id, None)
        self._update(endpoint_id, status=EndpointStatus.STOPPING, message="stopping")
        if endpoint.handle:
            try:
                self.runtimes[endpoint.backend].stop(endpoint.handle)
            except EnvhubError as exc:
                self._update(endpoint_id, status=EndpointStatus.FAILED, message=exc.message, stopped_at=utcnow())
                raise
        stopped = self._update(endpoint_id, status=EndpointStatus.STOPPED, message=reason, stopped_at=utcnow())
        assert stopped is not None
        return stopped

    def _fail(self, endpoint: Endpoint, reason: str) -> None:
        self._urls.pop(endpoint.id, None)
        self.runtimes[endpoint.backend].stop(endpoint.handle)
        self._update(endpoint.id, status=EndpointStatus.FAILED, message=reason, stopped_at=utcnow())

    # -- keeping the rows true

    def reconcile(self) -> None:
        """At start-up: rows match what runs, and nothing runs that no row claims."""
        live = self.leases.live_replicas()
        for endpoint in self.list(active_only=True):
            if endpoint.replica not in live:
                self._take_over(endpoint)
        claimed = {e.id for e in self.list(active_only=True)}
        for backend, runtime in self.runtimes.items():
            try:
                orphans = runtime.managed_endpoints() - claimed
                for orphan in orphans:
                    log.warning("removing orphaned %s endpoint %s", backend.value, orphan)
                    runtime.stop({"endpoint": orphan})
            except EnvhubError as exc:
                log.info("%s backend not checked for leftovers: %s", backend.value, exc.message)
        self._sweep(live)

    def _sweep(self, live: set[str]) -> None:
        """Remove what replicas that are gone started ahead of launches, once per change of who is alive."""
        if live == self._swept_for:
            return
        self._swept_for = live
        for backend, runtime in self.runtimes.items():
            try:
                runtime.sweep(live)
            except EnvhubError as exc:
                log.debug("%s backend not swept: %s", backend.value, exc.message)

    def _take_over(self, endpoint: Endpoint) -> None:
        """An endpoint whose replica is gone: keep it when it still runs as seen from here, else stop it."""
        with Session(self.engine) as session, session.begin():
            claimed = session.execute(
                update(Endpoint)
                .where(col(Endpoint.id) == endpoint.id, _same_replica(endpoint.replica))
                .values(replica=self.leases.replica)
                .returning(col(Endpoint.id))
            ).first()
        if claimed is None:
            return  # another replica took it first
        runtime = self.runtimes.get(endpoint.backend)
        try:
            running = endpoint.status == EndpointStatus.RUNNING
            if runtime is not None and running and runtime.is_running(endpoint.handle):
                log.info("endpoint %s of replica %s is now managed here", endpoint.id, endpoint.replica)
                return
            if runtime is not None and endpoint.handle:
                runtime.stop(endpoint.handle)
        except EnvhubError as exc:
            log.warning("could not check endpoint %s: %s", endpoint.id, exc.message)
        gone = f" (its replica {endpoint.replica} is gone)" if endpoint.replica else ""
        self._urls.pop(endpoint.id, None)
        self._update(
            endpoint.id,
            status=EndpointStatus.STOPPED,
            message=f"envhub restarted while it ran{gone}; launch it again",
            stopped_at=utcnow(),
        )

    def watch(self) -> None:
        """Mark this replica's endpoints that died as failed, stop those idle too long, take over orphans."""
        now = utcnow()
        idle_limit = timedelta(seconds=self.limits.idle_timeout_s)
        active = self.list(active_only=True)
        self._write_activity(active)
        live = self.leases.live_replicas()
        for endpoint in active:
            if endpoint.replica not in live:
                self._take_over(endpoint)
                continue
            if endpoint.replica != self.leases.replica or endpoint.status != EndpointStatus.RUNNING:
                continue
            runtime = self.runtimes.get(endpoint.backend)
            if runtime is None:
                continue
            if not runtime.is_running(endpoint.handle):
                self._fail(endpoint, self._death_note(endpoint))
                continue
            stats = self.traffic(endpoint.id).snapshot()
            # The last traffic through this replica's gateway or, as written to the row, any other's.
            seen = [as_utc(t) for t in (stats.last_active_at, endpoint.last_active_at) if t is not None]
            last = max(seen) if seen else as_utc(endpoint.started_at or now)
            if stats.active_sessions == 0 and now - last > idle_limit:
                idle = self.limits.idle_timeout_s
                spent = f"{idle:g} seconds" if idle < 120 else f"{idle / 60:g} minutes"
                self._stop(endpoint.id, f"stopped after {spent} without sessions")
        self._stop_unclaimed()
        self._sweep(live)

    def _write_activity(self, active: Sequence[Endpoint]) -> None:
        """Write when this replica's gateway last carried each endpoint's traffic, for the replica managing it."""
        for endpoint in active:
            with self._lock:
                traffic = self._traffic.get(endpoint.id)
            if traffic is None:
                continue
            if traffic.active_sessions > 0:
                traffic.touch()  # an open session is activity, however quiet
            if traffic.last_active <= self._active_written.get(endpoint.id, 0):
                continue
            when = datetime.fromtimestamp(traffic.last_active, UTC)
            with Session(self.engine) as session, session.begin():
                session.execute(
                    update(Endpoint)
                    .where(
                        col(Endpoint.id) == endpoint.id,
                        col(Endpoint.last_active_at).is_(None) | (col(Endpoint.last_active_at) < when),
                    )
                    .values(last_active_at=when)
                )
            self._active_written[endpoint.id] = traffic.last_active

    def _stop_unclaimed(self) -> None:
        """Local servers whose rows another replica stopped: it could not reach this machine's processes."""
        runtime = self.runtimes.get(Backend.PROCESS)
        if runtime is None:
            return
        mine = {e.id for e in self.list(active_only=True) if e.replica == self.leases.replica}
        for orphan in runtime.managed_endpoints() - mine:
            runtime.stop({"endpoint": orphan})

    def check_soon(self, endpoint_id: str) -> None:
        """The gateway saw an endpoint fail to answer: find out now whether it died."""
        self._urls.pop(endpoint_id, None)
        threading.Thread(target=self._check, args=(endpoint_id,), daemon=True).start()

    def _check(self, endpoint_id: str) -> None:
        endpoint = self.get(endpoint_id)
        if endpoint.replica != self.leases.replica:
            return  # its own replica watches it
        runtime = self.runtimes.get(endpoint.backend)
        if endpoint.status == EndpointStatus.RUNNING and runtime and not runtime.is_running(endpoint.handle):
            self._fail(endpoint, self._death_note(endpoint))

    @staticmethod
    def _death_note(endpoint: Endpoint) -> str:
        return death_note(Path(endpoint.log_path) if endpoint.log_path else None)

    def shutdown(self) -> None:
        """Stop this replica's local processes with it; containers and Spaces are reconciled on the next start."""
        try:
            for endpoint in self.list(active_only=True):
                if endpoint.backend == Backend.PROCESS and endpoint.replica == self.leases.replica:
                    self._stop(endpoint.id, "envhub stopped")
            self._stop_unclaimed()  # and those whose rows another replica stopped or took over
        finally:
            for runtime in self.runtimes.values():
                runtime.close()


def _same_replica(replica: str | None) -> ColumnElement[bool]:
    column = col(Endpoint.replica)
    return column.is_(None) if replica is None else column == replica
