"""Hosted endpoints: launch an environment on a backend, follow it, stop it."""

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request, status

from app.api.deps import CallerDep, EndpointsDep, EndpointTokensDep, SettingsDep
from app.settings import Settings
from app.urls import connection_base, endpoint_url
from core.callers import Access, Caller
from core.errors import NotFoundError
from core.sealing import EndpointTokens
from hosting.endpoints import EndpointManager
from hosting.models import Endpoint, EndpointPublic, EndpointsPublic, ReplicaStatus
from hosting.options import LaunchRequest
from hosting.runtimes.logs import log_tail

router = APIRouter(prefix="/api/endpoints", tags=["endpoints"])


def present(
    endpoint: Endpoint,
    manager: EndpointManager,
    tokens: EndpointTokens,
    settings: Settings,
    request: Request,
    caller: Caller,
) -> EndpointPublic:
    """The endpoint as the caller may see it: its owner and the admin see everything (its variables, log, the
    addresses of its servers, a private endpoint's token); anyone else sees what using its URL needs."""
    # Counters are this instance's gateway's; the last activity is any instance's, as written to the row.
    stats = manager.traffic.stats(endpoint)
    pool = manager.replica_store.public(endpoint, manager.routes.known(endpoint.id))
    ready = [r.internal_url for r in pool.replicas if r.status == ReplicaStatus.READY]
    private = endpoint.options.get("private") is True
    public = EndpointPublic.model_validate(
        endpoint.model_dump()
        | {
            "url": endpoint_url(connection_base(settings, request), endpoint.id),
            "latest": manager.store.newer_revision(endpoint),
            "internal_url": ready[0] if ready else None,
            "pool": pool,
            "stats": stats,
            "log_tail": log_tail(Path(endpoint.log_path) if endpoint.log_path else manager.log_path(endpoint.id)),
            "access_token": tokens.of(endpoint.id) if private else None,
        }
    )
    if manager.access.may_stop(caller, endpoint.owner):
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
    if caller.user is None and not caller.admin:
        hidden["owner"] = None
    return public.model_copy(update=hidden)


def _visible(endpoint: Endpoint, access: Access, caller: Caller) -> bool:
    """A private endpoint is listed to its owner and the admin only."""
    return endpoint.options.get("private") is not True or access.may_stop(caller, endpoint.owner)


@router.post("", status_code=status.HTTP_201_CREATED)
def launch_endpoint(
    body: LaunchRequest,
    request: Request,
    manager: EndpointsDep,
    tokens: EndpointTokensDep,
    settings: SettingsDep,
    caller: CallerDep,
) -> EndpointPublic:
    """Start an environment; it is `starting` until its server answers, then `running`.

    A signed-in caller owns it, and the space backend creates the Space in their namespace with their token.
    """
    return present(manager.launch(body, caller), manager, tokens, settings, request, caller)


@router.get("")
def list_endpoints(
    request: Request, manager: EndpointsDep, tokens: EndpointTokensDep, settings: SettingsDep, caller: CallerDep
) -> EndpointsPublic:
    shown = [e for e in manager.store.list() if _visible(e, manager.access, caller)][:100]
    endpoints = [present(e, manager, tokens, settings, request, caller) for e in shown]
    return EndpointsPublic(data=endpoints, count=len(endpoints))


@router.get("/{endpoint_id}")
def read_endpoint(
    endpoint_id: str,
    request: Request,
    manager: EndpointsDep,
    tokens: EndpointTokensDep,
    settings: SettingsDep,
    caller: CallerDep,
) -> EndpointPublic:
    endpoint = manager.store.get(endpoint_id)
    if not _visible(endpoint, manager.access, caller):
        raise NotFoundError(f"no endpoint {endpoint_id!r}; list them with GET /api/endpoints")
    return present(endpoint, manager, tokens, settings, request, caller)


@router.delete("/{endpoint_id}")
def stop_endpoint(
    endpoint_id: str,
    request: Request,
    manager: EndpointsDep,
    tokens: EndpointTokensDep,
    settings: SettingsDep,
    caller: CallerDep,
) -> EndpointPublic:
    """Stop an endpoint: its owner or the admin may; one nobody owns, anyone while sign-in is off (else the admin)."""
    return present(manager.stop(endpoint_id, caller), manager, tokens, settings, request, caller)
