"""Hosted endpoints: the one door to launch an environment on a backend, and stopping it.

An endpoint row is the truth users see. A launch checks who asks (core.callers.Access),
the request and the limits, records the endpoint as its caller's, and starts its server in
the background; the row says `starting`, then `running` or why it failed. Keeping the rows
true against what actually runs is the keeper's (hosting.reconcile), which works through this.
"""

import logging
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from catalog.cards import declared_variables
from catalog.models import EnvironmentDetail, Source
from catalog.revisions import note_image
from catalog.store import find_environment
from core.callers import Access, Caller
from core.clock import utcnow
from core.db import exclusive
from core.errors import EnvhubError, InvalidInputError, LaunchError
from core.leases import Leases
from gateway.paths import gateway_path
from hosting.endpoint_store import EndpointStore
from hosting.limits import LIMITS_LOCK, EndpointLimits, ensure_room, ensure_servers
from hosting.models import ACTIVE, Backend, Endpoint, EndpointStatus, Replica, ReplicaStatus
from hosting.options import BACKEND_OPTIONS, LaunchRequest, ProcessOptions, ReplicaRange
from hosting.replica_store import ReplicaStore, capacity_of
from hosting.replicas import Replicas
from hosting.routing import Routes
from hosting.runtimes import AnyRuntime, LaunchSpec, handle_of, is_service
from hosting.traffic import TrafficBook
from hosting.variables import ensure_plain_variables

__all__ = ["OPEN", "EndpointManager"]

log = logging.getLogger(__name__)

OPEN = Access(sign_in=False, anonymous_launch=True)  # no sign-in: anyone launches, and stops what nobody owns


class EndpointManager:
    """Endpoints of one envhub instance: it launches and stops its own, and its gateway serves any.

    envhub instances sharing a database each manage the endpoints they launched (the row's
    `instance`): a process endpoint's servers run on that instance's machine. The rows are the
    `store`'s (hosting.endpoint_store). Each endpoint is a pool of servers (`replicas`,
    hosting.replicas, with their rows in `replica_store`); `routes` is where the gateway reaches
    them, and `traffic` what it counts.
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
        self.store = EndpointStore(engine)  # the endpoints' rows
        self.routes = Routes(engine, runtimes, limits)
        self.replica_store = ReplicaStore(engine)  # the pools' rows and events
        self.replicas = Replicas(self.replica_store, runtimes, self.routes, logs_dir)  # their servers
        self.traffic = TrafficBook(engine)
        self._specs: dict[str, LaunchSpec[Any]] = {}  # endpoint -> what its replicas are launched with (secrets too)
        self._lock = threading.RLock()
        # Set as envhub stops: a start still under way then leaves its endpoint's row to the next start.
        self.closing = False

    def log_path(self, endpoint_id: str) -> Path:
        return self.logs_dir / f"{endpoint_id}.log"

    # -- launching

    def launch(self, request: LaunchRequest, caller: Caller, *, for_play: bool = False) -> Endpoint:
        """The one way to launch: check who asks and the request, record the endpoint as the caller's,
        starting, and start its first replicas in the background. One `for_play` (the Play tab's) goes after the
        shorter idle time of play.

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
        _ensure_runs_revision(environment, request.backend)
        if request.backend == Backend.PROCESS and environment.source == Source.HUB:
            self.access.ensure_may_run_hub_code(caller, environment.id)
        options = request.options
        if isinstance(options, ProcessOptions) and not self.access.trusts(caller):
            # Their variables could steer the interpreter, and their server runs on this machine: only plain and
            # declared variables, and a sandbox around it.
            declared = declared_variables(environment.card, environment.manifest)
            ensure_plain_variables(options.env | options.secrets, declared, environment.id)
            options = options.model_copy(update={"sandbox": True})
        options = runtime.check(environment, options, caller.token)
        endpoint = Endpoint(
            id=secrets.token_hex(5),
            environment=environment.id,
            revision=environment.sha,
            backend=request.backend,
            owner=caller.name,
            options={"env": options.env, "secrets": sorted(options.secrets), **options.own()},
            for_play=for_play,
            message="starting",
            instance=self.leases.instance,
        )
        endpoint.log_path = str(self.log_path(endpoint.id))
        # Counted and written under one lock with every instance, so that launches at once keep the limits.
        with self._lock, exclusive(self.engine, LIMITS_LOCK) as connection, Session(bind=connection) as session:
            ensure_room(session, self.limits, caller.name, options.replicas.min)
            session.add(endpoint)
            session.flush()
        endpoint = self.store.get(endpoint.id)
        spec = LaunchSpec(
            server_id=endpoint.id,
            environment=environment,
            log_path=self.log_path(endpoint.id),
            options=options,
            env=options.env | options.secrets,
            token=caller.token,
            root_path=gateway_path(endpoint.id),
        )
        self._specs[endpoint.id] = spec
        if is_service(runtime):
            spec = replace(spec, replicas=options.replicas.min)
            threading.Thread(target=self._start_service, args=(runtime, spec), name=f"launch-{endpoint.id}").start()
        else:
            self.grow(endpoint, options.replicas.min, "launch", reserved=True)
        return endpoint

    def spec(self, endpoint: Endpoint) -> LaunchSpec[Any] | None:
        """What a new replica of the endpoint is launched with; None when that is not known here (it was
        launched with secrets by another envhub, which does not hand them on)."""
        known = self._specs.get(endpoint.id)
        if known is not None:
            return known
        if endpoint.options.get("secrets"):
            return None
        runtime = self.runtimes.get(endpoint.backend)
        with Session(self.engine) as session:
            environment = find_environment(session, endpoint.environment)
        if runtime is None or environment is None:
            return None
        if endpoint.revision is not None:  # every replica serves the revision the endpoint was launched at
            latest = environment.sha if environment.sha != endpoint.revision else None
            environment = environment.model_copy(update={"sha": endpoint.revision, "latest": latest})
        own = {k: v for k, v in endpoint.options.items() if k not in ("env", "secrets")}
        options = BACKEND_OPTIONS[endpoint.backend].model_validate(
            {"backend": endpoint.backend, "env": endpoint.options.get("env") or {}, **own}
        )
        spec = LaunchSpec(
            server_id=endpoint.id,
            environment=environment,
            log_path=self.log_path(endpoint.id),
            options=options,
            env=dict(options.env),
            root_path=gateway_path(endpoint.id),
        )
        if endpoint.image_digest is not None:
            spec = _on_image(spec, endpoint.image_digest)
        self._specs[endpoint.id] = spec
        return spec

    def grow(self, endpoint: Endpoint, count: int, kind: str, *, reserved: bool = False) -> int:
        """Start `count` more replicas in the background, as far as the limits allow; how many are starting.

        reserved: the launch has counted them against the limits already.
        """
        spec = self.spec(endpoint)
        if spec is None:
            self.replica_store.event(endpoint.id, "hold", "cannot start replicas here: it was launched with secrets")
            return 0
        if not reserved:
            try:
                with self._lock, exclusive(self.engine, LIMITS_LOCK) as connection, Session(bind=connection) as session:
                    ensure_servers(session, self.limits, endpoint.owner, count)
            except EnvhubError as exc:
                self.replica_store.event(endpoint.id, "hold", f"cannot grow by {count}: {exc.message}")
                return 0
        for number, row in enumerate(self.replica_store.add(endpoint, capacity_of(endpoint), count)):
            first = number == 0 and kind in ("launch", "restart")  # its progress is the endpoint's
            threading.Thread(
                target=self._start_replica,
                args=(endpoint, row, spec, kind, first),
                name=f"replica-{row.id}",
                daemon=True,
            ).start()
        return count

    def _start_replica(self, endpoint: Endpoint, row: Replica, spec: LaunchSpec[Any], kind: str, first: bool) -> None:
        report = (lambda message: self._note(endpoint.id, message)) if first else (lambda message: None)
        try:
            replica, note = self.replicas.start(endpoint, row, spec, report)
        except LaunchError as exc:
            self._replica_failed(endpoint.id, exc.message)
            return
        current = self.store.update(endpoint.id)
        if current is None or current.status not in ACTIVE or self.closing:
            self.replicas.stop(endpoint, replica, status=ReplicaStatus.STOPPED)  # the endpoint stopped meanwhile
            return
        digest = replica.handle.get("digest")
        if digest and current.image_digest is None:
            self.store.update(endpoint.id, image_digest=digest)
            self._specs[endpoint.id] = _on_image(spec, digest)
            if current.revision:
                with Session(self.engine) as session:
                    note_image(session, current.environment, current.revision, digest)
        if current.status == EndpointStatus.STARTING:
            self.traffic.of(endpoint.id).touch()
            self.store.update(endpoint.id, status=EndpointStatus.RUNNING, message=_running(note), started_at=utcnow())
            self.routes.refresh(endpoint.id)
        if kind != "launch":
            self.replica_store.event(endpoint.id, kind, f"replica {replica.id} started ({_why(kind)})")

    def _replica_failed(self, endpoint_id: str, message: str) -> None:
        """A replica did not start: the endpoint fails when it has none left that run or start."""
        with self._lock:
            current = self.store.update(endpoint_id)
            if current is None or current.status not in ACTIVE or self.closing:
                return  # envhub stopping ended the start: the endpoint starts again with envhub
            if any(
                r.status in (ReplicaStatus.STARTING, ReplicaStatus.READY) for r in self.replica_store.rows(endpoint_id)
            ):
                self.replica_store.event(endpoint_id, "fail", f"a replica did not start: {message}")
                return
            if current.status == EndpointStatus.STARTING:
                self.store.update(endpoint_id, status=EndpointStatus.FAILED, message=message, stopped_at=utcnow())
            else:
                self.replica_store.event(endpoint_id, "fail", f"a replica did not start: {message}")

    def _start_service(self, runtime: AnyRuntime, spec: LaunchSpec[Any]) -> None:
        """A service runtime starts every replica as one service; its tasks become the replicas' rows."""
        endpoint_id = spec.server_id
        try:
            launched = runtime.start(spec, lambda message: self._note(endpoint_id, message))
        except LaunchError as exc:
            self.store.update(endpoint_id, status=EndpointStatus.FAILED, message=exc.message, stopped_at=utcnow())
            return
        except Exception as exc:
            log.exception("launching %s failed", endpoint_id)
            message = f"launch failed unexpectedly: {type(exc).__name__}: {exc}"
            self.store.update(endpoint_id, status=EndpointStatus.FAILED, message=message, stopped_at=utcnow())
            return
        current = self.store.update(endpoint_id, handle=launched.handle.model_dump())
        if current is None or current.status != EndpointStatus.STARTING:
            runtime.stop(launched.handle)  # stopped while it was starting
            return
        if self.closing:
            return  # the service runs on, and envhub's next start finds it
        self.traffic.of(endpoint_id).touch()
        running = self.store.update(
            endpoint_id, status=EndpointStatus.RUNNING, message=_running(launched.note), started_at=utcnow()
        )
        assert running is not None
        self.replicas.sync_tasks(running, self.routes.known(endpoint_id))

    def restart(self, endpoint: Endpoint, why: str) -> None:
        """Start an endpoint whose servers are gone again, under its id and at the revision it served: its URL
        keeps working. One that cannot start here again is stopped, saying why."""
        spec = self.spec(endpoint)
        if spec is None:
            lost = (
                "it was launched with secrets, which envhub does not keep"
                if endpoint.options.get("secrets")
                else (f"its {endpoint.backend.value} backend or its environment is not available here")
            )
            self.end(endpoint.id, f"{why}, and it cannot start again: {lost}; launch it again")
            return
        self.store.update(endpoint.id, status=EndpointStatus.STARTING, message=f"starting again: {why}")
        runtime = self.runtimes[endpoint.backend]
        size = ReplicaRange.model_validate(endpoint.options.get("replicas", 1))
        if is_service(runtime):
            spec = replace(spec, replicas=size.min)
            threading.Thread(target=self._start_service, args=(runtime, spec), name=f"restart-{endpoint.id}").start()
        else:
            self.grow(endpoint, size.min, "restart", reserved=True)

    def close(self) -> None:
        """envhub stops: each of its process endpoints' servers stops, and the endpoint starts again with envhub
        (under its id); one that could not (launched with secrets) is stopped. Containers, services and Spaces run
        on. A start under way from now on leaves its row to the next start. The servers stop side by side: each
        may take its grace after SIGTERM."""
        self.closing = True
        endpoints = [
            endpoint
            for endpoint in self.store.list(active_only=True)
            if endpoint.backend == Backend.PROCESS and endpoint.instance == self.leases.instance
        ]
        if not endpoints:
            return
        plural = "" if len(endpoints) == 1 else "s"
        log.info("stopping %d endpoint%s: %s", len(endpoints), plural, ", ".join(e.id for e in endpoints))
        with ThreadPoolExecutor(max_workers=len(endpoints), thread_name_prefix="envhub-close") as pool:
            for done in [pool.submit(self._close_one, endpoint) for endpoint in endpoints]:
                done.result()

    def _close_one(self, endpoint: Endpoint) -> None:
        if endpoint.options.get("secrets"):
            self.end(
                endpoint.id, "envhub stopped; it was launched with secrets, which envhub does not keep: launch it again"
            )
            return
        self.store.update(endpoint.id, status=EndpointStatus.STARTING, message=_BACK_WITH_ENVHUB)
        self._stop_servers(endpoint, ReplicaStatus.STOPPED, "envhub stopped")

    # -- stopping and recording

    def stop(self, endpoint_id: str, caller: Caller) -> Endpoint:
        """Stop an endpoint on request: its owner or the admin may (see Access for one nobody owns)."""
        endpoint = self.store.get(endpoint_id)
        self.access.ensure_may_manage(caller, endpoint_id, endpoint.owner)
        return self.end(endpoint_id, "stopped on request")

    def end(self, endpoint_id: str, reason: str) -> Endpoint:
        """Stop an endpoint's servers and record why (on request, idle, envhub stopping)."""
        endpoint = self.store.get(endpoint_id)
        if endpoint.status in (EndpointStatus.STOPPED, EndpointStatus.FAILED):
            return endpoint
        self.store.update(endpoint_id, status=EndpointStatus.STOPPING, message="stopping")
        try:
            self._stop_servers(endpoint, ReplicaStatus.STOPPED, reason)
        except EnvhubError as exc:
            self.store.update(endpoint_id, status=EndpointStatus.FAILED, message=exc.message, stopped_at=utcnow())
            raise
        stopped = self.store.update(endpoint_id, status=EndpointStatus.STOPPED, message=reason, stopped_at=utcnow())
        assert stopped is not None
        return stopped

    def fail(self, endpoint: Endpoint, reason: str) -> None:
        """An endpoint that cannot go on: whatever is left of it is stopped, and the row says why."""
        self._stop_servers(endpoint, ReplicaStatus.FAILED, reason)
        self.store.update(endpoint.id, status=EndpointStatus.FAILED, message=reason, stopped_at=utcnow())

    def _stop_servers(self, endpoint: Endpoint, status: ReplicaStatus, reason: str) -> None:
        pool = self.routes.known(endpoint.id)
        self.routes.forget(endpoint.id)
        self._specs.pop(endpoint.id, None)
        runtime = self.runtimes.get(endpoint.backend)
        service = handle_of(runtime, endpoint.handle) if runtime is not None else None
        for replica in self.replica_store.rows(endpoint.id):
            if pool is not None:
                pool.lose(replica.id, reason)
            self.replicas.stop(
                endpoint, replica, status=status, error="" if status == ReplicaStatus.STOPPED else reason
            )
        if runtime is not None and service is not None:
            runtime.stop(service)

    def _note(self, endpoint_id: str, message: str) -> None:
        self.store.update(endpoint_id, message=message)


_BACK_WITH_ENVHUB = "envhub stopped; it starts again under this id when envhub starts"


def _on_image(spec: LaunchSpec[Any], digest: str) -> LaunchSpec[Any]:
    """The spec with its image named by id: a tag that moves on (a Space's `:latest`) no longer changes what a
    new replica runs."""
    return replace(spec, options=spec.options.model_copy(update={"image": digest}))


def _ensure_runs_revision(environment: EnvironmentDetail, backend: Backend) -> None:
    """Refuse a pinned revision the backend cannot serve: the process, docker and swarm backends download a Space's
    commit (and build it); the space backend copies the Space as it is now."""
    if environment.latest is None:
        return  # the catalog's current revision
    if environment.source == Source.TEMPLATE:
        raise InvalidInputError(
            f"{environment.id} is at {environment.latest} on disk now, and revision {environment.sha} is gone; "
            f"launch {environment.id} (its current revision)"
        )
    if backend == Backend.SPACE:
        raise InvalidInputError(
            f"the space backend copies {environment.id} as it is now ({environment.latest[:12]}); launch revision "
            f"{(environment.sha or '')[:12]} with the process, docker or swarm backend, which download that commit"
        )


def _running(note: str) -> str:
    """A running endpoint's status, with what its launch did otherwise than the environment's files say."""
    return f"running; {note}" if note else "running"


def _why(kind: str) -> str:
    return {
        "grow": "sessions were waiting or the pool was nearly full",
        "replace": "to keep the pool's min",
        "restart": "envhub started again",
    }.get(kind, kind)
