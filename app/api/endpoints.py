"""Hosted endpoints: launch an environment on a backend, follow it, stop it."""

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, status

from app.api.deps import CallerDep, EndpointsDep, EndpointTokensDep, SettingsDep
from app.urls import connection_base, endpoint_url
from core.callers import Access, Caller
from core.errors import NotFoundError
from hosting.models import Endpoint, EndpointPublic, EndpointsPublic, ReplicaStatus
from hosting.options import LaunchRequest
from hosting.runtimes.logs import log_tail

router = APIRouter(prefix="/api/endpoints", tags=["endpoints"])


@dataclass
class Presenter:
    """Shows endpoints to this request's caller (FastAPI builds one per request from the fields' dependencies)."""

    request: Request
    manager: EndpointsDep
    tokens: EndpointTokensDep
    settings: SettingsDep
    caller: CallerDep

    def __call__(self, endpoint: Endpoint) -> EndpointPublic:
        """The endpoint as the caller may see it: its owner and the admin see everything (its variables, log, the
        addresses of its servers, its token); anyone else sees what using its URL needs."""
        # Counters are this instance's gateway's; the last activity is any instance's, as written to the row.
        stats = self.manager.stats(endpoint)
        pool = self.manager.pool_of(endpoint)
        ready = [r.internal_url for r in pool.replicas if r.status == ReplicaStatus.READY]
        public = EndpointPublic.model_validate(
            endpoint.model_dump()
            | {
                "url": endpoint_url(connection_base(self.settings, self.request), endpoint.id),
                "latest": self.manager.newer_revision(endpoint),
                "internal_url": ready[0] if ready else None,
                "pool": pool,
                "stats": stats,
                "log_tail": log_tail(
                    Path(endpoint.log_path) if endpoint.log_path else self.manager.log_path(endpoint.id)
                ),
                "access_token": self.tokens.of(endpoint.id),
            }
        )
        if self.manager.access.may_manage(self.caller, endpoint.owner):
            return public
        replicas = [r.model_copy(update={"internal_url": None, "host": "", "last_error": ""}) for r in pool.replicas]
        hidden: dict[str, Any] = {
            "options": {k: v for k, v in endpoint.options.items() if k not in ("env", "secrets")},
            "internal_url": None,
            "log_tail": [],
            "access_token": None,
            "pool": pool.model_copy(update={"replicas": replicas}),
            "message": endpoint.status.value,
        }
        if self.caller.user is None and not self.caller.admin:
            hidden["owner"] = None
        return public.model_copy(update=hidden)


PresenterDep = Annotated[Presenter, Depends()]


def _visible(endpoint: Endpoint, access: Access, caller: Caller) -> bool:
    """A private endpoint is listed to its owner and the admin only."""
    return access.may_use(caller, endpoint.owner, private=endpoint.private)


@router.post("", status_code=status.HTTP_201_CREATED)
def launch_endpoint(
    body: LaunchRequest, manager: EndpointsDep, caller: CallerDep, show: PresenterDep
) -> EndpointPublic:
    """Start an environment; it is `starting` until its server answers, then `running`.

    A signed-in caller owns it, and the space backend creates the Space in their namespace with their token.
    """
    return show(manager.launch(body, caller))


@router.get("")
def list_endpoints(manager: EndpointsDep, caller: CallerDep, show: PresenterDep) -> EndpointsPublic:
    shown = [e for e in manager.list() if _visible(e, manager.access, caller)][:100]
    endpoints = [show(e) for e in shown]
    return EndpointsPublic(data=endpoints, count=len(endpoints))


@router.get("/{endpoint_id}")
def read_endpoint(endpoint_id: str, manager: EndpointsDep, caller: CallerDep, show: PresenterDep) -> EndpointPublic:
    endpoint = manager.get(endpoint_id)
    if not _visible(endpoint, manager.access, caller):
        raise NotFoundError(f"no endpoint {endpoint_id!r}; list them with GET /api/endpoints")
    return show(endpoint)


@router.delete("/{endpoint_id}")
def stop_endpoint(endpoint_id: str, manager: EndpointsDep, caller: CallerDep, show: PresenterDep) -> EndpointPublic:
    """Stop an endpoint: its owner or the admin may; one nobody owns, anyone while sign-in is off (else the admin)."""
    return show(manager.stop(endpoint_id, caller))
