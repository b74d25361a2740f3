"""Launching's checks, limits and spec: who may launch what, on which backend, and what its replicas start with.

The launcher writes nothing of an endpoint's state: the lifecycle (hosting.lifecycle) records a launch it
prepared, within the room it found under the limits, and starts its servers.
"""

import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from catalog.cards import declared_variables
from catalog.models import EnvironmentDetail, Source
from catalog.store import find_environment
from core.callers import Access, Caller
from core.db import exclusive
from core.errors import InvalidInputError
from gateway.paths import gateway_path
from hosting.limits import LIMITS_LOCK, EndpointLimits, ensure_room, ensure_servers
from hosting.models import Backend, Endpoint
from hosting.options import BACKEND_OPTIONS, LaunchRequest, ProcessOptions
from hosting.runtimes.base import AnyRuntime, LaunchSpec
from hosting.variables import ensure_plain_variables

__all__ = ["Launcher"]


class Launcher:
    """Checks launches against who asks, the catalog and the backends; keeps each endpoint's launch spec."""

    def __init__(
        self,
        engine: Engine,
        runtimes: dict[Backend, AnyRuntime],
        logs_dir: Path,
        limits: EndpointLimits,
        access: Access,
        instance: str,
    ) -> None:
        self.engine = engine
        self.runtimes = runtimes
        self.logs_dir = logs_dir
        self.limits = limits
        self.access = access
        self.instance = instance
        self._specs: dict[str, LaunchSpec[Any]] = {}  # endpoint -> what its replicas are launched with (secrets too)
        self._lock = threading.Lock()

    def log_path(self, endpoint_id: str) -> Path:
        return self.logs_dir / f"{endpoint_id}.log"

    def prepare(self, request: LaunchRequest, caller: Caller, *, for_play: bool) -> tuple[Endpoint, LaunchSpec[Any]]:
        """Check who asks and the request: the endpoint to record as the caller's, starting, and its spec.

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
            instance=self.instance,
        )
        endpoint.log_path = str(self.log_path(endpoint.id))
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
        return endpoint, spec

    @contextmanager
    def room(self, owner: str | None, servers: int) -> Iterator[Session]:
        """A session in which a new endpoint of `servers` replicas fits the limits; TooManyRequestsError when it does
        not. Counted and written under one lock with every instance, so that launches at once keep the limits."""
        with self._lock, exclusive(self.engine, LIMITS_LOCK) as connection, Session(bind=connection) as session:
            ensure_room(session, self.limits, owner, servers)
            yield session

    def ensure_servers(self, owner: str | None, more: int) -> None:
        """Refuse `more` replicas of an owner's endpoint that would pass the limits on servers."""
        with self._lock, exclusive(self.engine, LIMITS_LOCK) as connection, Session(bind=connection) as session:
            ensure_servers(session, self.limits, owner, more)

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

    def pin_image(self, endpoint_id: str, spec: LaunchSpec[Any], digest: str) -> None:
        """New replicas of the endpoint run the image its first one ran, named by id."""
        self._specs[endpoint_id] = _on_image(spec, digest)

    def forget(self, endpoint_id: str) -> None:
        self._specs.pop(endpoint_id, None)


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
