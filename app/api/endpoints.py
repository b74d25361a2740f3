"""Hosted endpoints: launch an environment on a backend, follow it, stop it."""

from pathlib import Path

from fastapi import APIRouter, Request, status

from app.api.deps import CallerDep, EndpointsDep, SettingsDep
from app.settings import Settings
from app.urls import connection_base, endpoint_url
from hosting.endpoints import EndpointManager
from hosting.models import Endpoint, EndpointPublic, EndpointsPublic, ReplicaStatus
from hosting.options import LaunchRequest
from hosting.runtimes.logs import log_tail

router = APIRouter(prefix="/api/endpoints", tags=["endpoints"])


def present(endpoint: Endpoint, manager: EndpointManager, settings: Settings, request: Request) -> EndpointPublic:
    # Counters are this replica's gateway's; the last activity is any replica's, as written to the row.
    stats = manager.traffic.stats(endpoint)
    pool = manager.replicas.public(endpoint, manager.routes.known(endpoint.id))
    ready = [r.internal_url for r in pool.replicas if r.status == ReplicaStatus.READY]
    return EndpointPublic.model_validate(
        endpoint.model_dump()
        | {
            "url": endpoint_url(connection_base(settings, request), endpoint.id),
            "latest": manager.newer_revision(endpoint),
            "internal_url": ready[0] if ready else None,
            "pool": pool,
            "stats": stats,
            "log_tail": log_tail(Path(endpoint.log_path) if endpoint.log_path else manager.log_path(endpoint.id)),
        }
    )


@router.post("", status_code=status.HTTP_201_CREATED)
def launch_endpoint(
    body: LaunchRequest, request: Request, settings: SettingsDep, manager: EndpointsDep, caller: CallerDep
) -> EndpointPublic:
    """Start an environment; it is `starting` until its server answers, then `running`.

    A signed-in caller owns it, and the space backend creates the Space in their namespace with their token.
    """
    return present(manager.launch(body, caller), manager, settings, request)


@router.get("")
def list_endpoints(request: Request, settings: SettingsDep, manager: EndpointsDep) -> EndpointsPublic:
    endpoints = [present(e, manager, settings, request) for e in manager.list()[:100]]
    return EndpointsPublic(data=endpoints, count=len(endpoints))


@router.get("/{endpoint_id}")
def read_endpoint(endpoint_id: str, request: Request, settings: SettingsDep, manager: EndpointsDep) -> EndpointPublic:
    return present(manager.get(endpoint_id), manager, settings, request)


@router.delete("/{endpoint_id}")
def stop_endpoint(
    endpoint_id: str, request: Request, settings: SettingsDep, manager: EndpointsDep, caller: CallerDep
) -> EndpointPublic:
    """Stop an endpoint: its owner or the admin may; one nobody owns, anyone while sign-in is off (else the admin)."""
    return present(manager.stop(endpoint_id, caller), manager, settings, request)
