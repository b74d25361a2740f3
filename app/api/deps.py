"""What request handlers receive: a database session, the settings, the syncer, checker and monitor, admin checks."""

import secrets
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlmodel import Session

from app.settings import Settings
from catalog.sync import Syncer
from conformance.checker import Checker
from core.errors import ForbiddenError, UnauthorizedError
from hosting.endpoints import EndpointManager
from hosting.monitor import HealthMonitor


def get_session(request: Request) -> Iterator[Session]:
    with Session(request.app.state.engine) as session:
        yield session


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_syncer(request: Request) -> Syncer:
    syncer: Syncer = request.app.state.syncer
    return syncer


def get_endpoints(request: Request) -> EndpointManager:
    manager: EndpointManager = request.app.state.endpoints
    return manager


def get_checker(request: Request) -> Checker:
    checker: Checker = request.app.state.checker
    return checker


def get_monitor(request: Request) -> HealthMonitor:
    monitor: HealthMonitor = request.app.state.monitor
    return monitor


SessionDep = Annotated[Session, Depends(get_session)]
CheckerDep = Annotated[Checker, Depends(get_checker)]
MonitorDep = Annotated[HealthMonitor, Depends(get_monitor)]
EndpointsDep = Annotated[EndpointManager, Depends(get_endpoints)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
SyncerDep = Annotated[Syncer, Depends(get_syncer)]

_bearer = HTTPBearer(auto_error=False)


def require_admin(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Admin routes need `Authorization: Bearer $ENVHUB_ADMIN_TOKEN`."""
    if settings.admin_token is None or not settings.admin_token.get_secret_value():
        raise ForbiddenError("admin routes are off: set ENVHUB_ADMIN_TOKEN on the server to use them")
    if credentials is None:
        raise UnauthorizedError("send the admin token as 'Authorization: Bearer <ENVHUB_ADMIN_TOKEN>'")
    expected = settings.admin_token.get_secret_value().encode()
    if not secrets.compare_digest(credentials.credentials.encode(), expected):
        raise UnauthorizedError("the bearer token is not this server's ENVHUB_ADMIN_TOKEN")


AdminDep = Depends(require_admin)
