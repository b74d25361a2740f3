"""What request handlers receive, all from the one services object: a database session, the settings, the parts
of envhub they use, who is calling (with the CSRF check) and the admin check. Nothing else reads the app's state."""

import secrets
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlmodel import Session
from starlette.requests import HTTPConnection

from app.auth.sessions import SESSION_COOKIE
from app.services import Services
from app.settings import Settings
from catalog.space_health import SpaceHealth
from catalog.sync import Syncer
from conformance.checker import Checker
from core.callers import Caller
from core.errors import ForbiddenError, UnauthorizedError
from hosting.endpoints import EndpointManager
from hosting.publish import Publisher


def get_services(connection: HTTPConnection) -> Services:
    services: Services = connection.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


def get_session(services: ServicesDep) -> Iterator[Session]:
    with services.db() as session:
        yield session


def get_settings(services: ServicesDep) -> Settings:
    return services.settings


def get_syncer(services: ServicesDep) -> Syncer:
    return services.syncer


def get_endpoints(services: ServicesDep) -> EndpointManager:
    return services.endpoints


def get_checker(services: ServicesDep) -> Checker:
    return services.checker


def get_spaces(services: ServicesDep) -> SpaceHealth:
    return services.monitor.spaces


def get_publisher(services: ServicesDep) -> Publisher:
    return services.publisher


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
SyncerDep = Annotated[Syncer, Depends(get_syncer)]
EndpointsDep = Annotated[EndpointManager, Depends(get_endpoints)]
CheckerDep = Annotated[Checker, Depends(get_checker)]
SpacesDep = Annotated[SpaceHealth, Depends(get_spaces)]
PublisherDep = Annotated[Publisher, Depends(get_publisher)]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _bearer(request: Request) -> str | None:
    scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


def require_csrf(request: Request) -> None:
    """Router-wide: a state-changing request that rides on a session cookie must also send its CSRF token.

    A bearer token is not sent by browsers on their own, so it needs none; neither does a cookie-less call.
    """
    if request.method in SAFE_METHODS or _bearer(request) is not None:
        return
    cookie = request.cookies.get(SESSION_COOKIE)
    identities = get_services(request).identities
    if not cookie or identities.store.csrf_ok(cookie, request.headers.get("x-csrf-token")):
        return
    if identities.store.find(cookie) is not None:  # a stale cookie carries no authority: nothing to protect
        raise ForbiddenError(
            "a signed-in request that changes something needs the X-CSRF-Token header "
            "(its value is csrf_token in GET /api/me), or send 'Authorization: Bearer <token>' instead",
            code="csrf_token_required",
        )


def get_caller(request: Request) -> Caller:
    """Who is calling; checked against the CSRF token first when it changes something."""
    require_csrf(request)
    return get_services(request).identities.resolve(request.headers, request.cookies)


CallerDep = Annotated[Caller, Depends(get_caller)]


_admin_bearer = HTTPBearer(auto_error=False)


def require_admin(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_admin_bearer)],
) -> None:
    """Admin routes need `Authorization: Bearer $ENVHUB_ADMIN_TOKEN`."""
    if settings.admin_token is None or not settings.admin_token.get_secret_value():
        raise ForbiddenError(
            "admin routes are off: set ENVHUB_ADMIN_TOKEN on the server to use them", code="admin_routes_off"
        )
    if credentials is None:
        raise UnauthorizedError(
            "send the admin token as 'Authorization: Bearer <ENVHUB_ADMIN_TOKEN>'", code="admin_token_required"
        )
    expected = settings.admin_token.get_secret_value().encode()
    if not secrets.compare_digest(credentials.credentials.encode(), expected):
        raise UnauthorizedError("the bearer token is not this server's ENVHUB_ADMIN_TOKEN", code="admin_token_refused")


AdminDep = Depends(require_admin)
