"""Hosted endpoints: the one door to launch an environment on a backend, and stopping it.

An endpoint row is the truth users see. A launch checks who asks (core.callers.Access),
the request and the limits, records the endpoint as its caller's, and starts its server in
the background; the row says `starting`, then `running` or why it failed. Keeping the rows
true against what actually runs is the keeper's (hosting.reconcile), which works through this.
"""

import logging
import secrets
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select
from sqlmodel import Session, col

from catalog.models import ConformanceSummary
from catalog.store import find_environment
from core.callers import Access, Caller
from core.clock import utcnow
from core.db import exclusive
from core.errors import EnvhubError, InvalidInputError, LaunchError, NotFoundError
from core.leases import Leases
from hosting.limits import LIMITS_LOCK, EndpointLimits, ensure_room
from hosting.models import ACTIVE, Backend, Endpoint, EndpointStatus
from hosting.options import LaunchRequest
from hosting.routing import Routes, gateway_path
from hosting.runtimes import AnyRuntime, Handle, LaunchSpec, handle_of
from hosting.traffic import TrafficBook

__all__ = ["OPEN", "EndpointManager"]

log = logging.getLogger(__name__)

OPEN = Access(sign_in=False, anonymous_launch=True)  # no sign-in: anyone launches, and stops what nobody owns


class EndpointManager:
    """Endpoints of one replica: it launches and stops its own, and its gateway serves any.

    Replicas sharing a database each manage the endpoints they launched (the row's
    `replica`): a process endpoint runs on that replica's machine. `routes` is where the
    gateway reaches them, and `traffic` what it counts.
    """

    def __init__(
        self,
        engine: Engine,
        runtimes: dict[Backend, AnyRuntime],
        logs_dir: Path,
        limits: EndpointLimits,
        leases: Leases | None = None,
        access: Access = OPEN,
    ) -> None:
        self.engine = engine
        self.runtimes = runtimes
        self.logs_dir = logs_dir
        self.limits = limits
        self.leases = leases or Leases(engine)
        self.access = access
        self.routes = Routes(engine, runtimes)
        self.traffic = TrafficBook(engine)
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

    def running_endpoint(self, environment_id: str) -> Endpoint | None:
        """The newest running endpoint of an environment."""
        running = (e for e in self.list(active_only=True) if e.status == EndpointStatus.RUNNING)
        return next((e for e in running if e.environment == environment_id), None)

    def active_by_environment(self) -> dict[str, str]:
        """environment id -> status of its newest active endpoint."""
        found: dict[str, str] = {}
        for endpoint in self.list(active_only=True):
            found.setdefault(endpoint.environment, endpoint.status.value)
        return found

    def log_path(self, endpoint_id: str) -> Path:
        return self.logs_dir / f"{endpoint_id}.log"

    def handle(self, endpoint: Endpoint) -> Handle | None:
        """The endpoint's handle as its runtime reads it; None when it never started or its backend is not here."""
        runtime = self.runtimes.get(endpoint.backend)
        return handle_of(runtime, endpoint.handle) if runtime is not None else None

    # -- launching

    def launch(self, request: LaunchRequest, caller: Caller) -> Endpoint:
        """The one way to launch: check who asks and the request, record the endpoint as the caller's,
        starting, and start it in the background.

        A signed-in caller owns it, and the space backend creates the Space with their Hub token, in their namespace.
        """
        self.access.ensure_may_launch(caller)
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
        options = runtime.check(environment, request.options, caller.token)
        endpoint = Endpoint(
            id=secrets.token_hex(5),
            environment=environment.id,
            backend=request.backend,
            owner=caller.name,
            options={"env": options.env, "secrets": sorted(options.secrets), **options.own()},
            message="starting",
            replica=self.leases.replica,
        )
        endpoint.log_path = str(self.log_path(endpoint.id))
        # Counted and written under one lock with every replica, so that launches at once keep the limits.
        with self._lock, exclusive(self.engine, LIMITS_LOCK) as connection, Session(bind=connection) as session:
            ensure_room(session, self.limits, caller.name)
            session.add(endpoint)
            session.flush()
        endpoint = self.get(endpoint.id)
        spec = LaunchSpec(
            endpoint_id=endpoint.id,
            environment=environment,
            log_path=self.log_path(endpoint.id),
            options=options,
            env=options.env | options.secrets,
            token=caller.token,
            root_path=gateway_path(endpoint.id),
        )
        threading.Thread(target=self._start, args=(runtime, spec), name=f"launch-{endpoint.id}", daemon=True).start()
        return endpoint

    def _start(self, runtime: AnyRuntime, spec: LaunchSpec[Any]) -> None:
        try:
            launched = runtime.start(spec, lambda message: self._note(spec.server_id, message))
        except LaunchError as exc:
            self.update(spec.server_id, status=EndpointStatus.FAILED, message=exc.message, stopped_at=utcnow())
            return
        except Exception as exc:
            log.exception("launching %s failed", spec.server_id)
            message = f"launch failed unexpectedly: {type(exc).__name__}: {exc}"
            self.update(spec.server_id, status=EndpointStatus.FAILED, message=message, stopped_at=utcnow())
            return
        current = self.update(spec.server_id)
        if current is None or current.status != EndpointStatus.STARTING:
            runtime.stop(launched.handle)  # stopped while it was starting
            return
        self.traffic.of(spec.server_id).touch()
        self.routes.remember(spec.server_id, runtime, launched.url, launched.handle)
        self.update(
            spec.server_id,
            status=EndpointStatus.RUNNING,
            message="running",
            internal_url=launched.url,
            handle=launched.handle.model_dump(),
            started_at=utcnow(),
        )

    # -- stopping and recording

    def stop(self, endpoint_id: str, caller: Caller) -> Endpoint:
        """Stop an endpoint on request: its owner or the admin may (see Access for one nobody owns)."""
        endpoint = self.get(endpoint_id)
        self.access.ensure_may_stop(caller, endpoint_id, endpoint.owner)
        return self.end(endpoint_id, "stopped on request")

    def end(self, endpoint_id: str, reason: str) -> Endpoint:
        """Stop an endpoint's server and record why (on request, idle, envhub stopping)."""
        endpoint = self.get(endpoint_id)
        if endpoint.status in (EndpointStatus.STOPPED, EndpointStatus.FAILED):
            return endpoint
        self.routes.forget(endpoint_id)
        self.update(endpoint_id, status=EndpointStatus.STOPPING, message="stopping")
        handle = self.handle(endpoint)
        if handle is not None:
            try:
                self.runtimes[endpoint.backend].stop(handle)
            except EnvhubError as exc:
                self.update(endpoint_id, status=EndpointStatus.FAILED, message=exc.message, stopped_at=utcnow())
                raise
        stopped = self.update(endpoint_id, status=EndpointStatus.STOPPED, message=reason, stopped_at=utcnow())
        assert stopped is not None
        return stopped

    def fail(self, endpoint: Endpoint, reason: str) -> None:
        """An endpoint whose server died: whatever is left of it is stopped, and the row says why."""
        self.routes.forget(endpoint.id)
        handle = self.handle(endpoint)
        if handle is not None:
            self.runtimes[endpoint.backend].stop(handle)
        self.update(endpoint.id, status=EndpointStatus.FAILED, message=reason, stopped_at=utcnow())

    def _note(self, endpoint_id: str, message: str) -> None:
        self.update(endpoint_id, message=message)

    def update(self, endpoint_id: str, **values: Any) -> Endpoint | None:
        """Write values to an endpoint's row; the row as it is then, or None when there is none."""
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
        self.update(endpoint_id, conformance=summary.model_dump(mode="json"))
