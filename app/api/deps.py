"""What request handlers receive, from the one services object: a database session, the settings, each part of
envhub they use (that part only, never the whole), who is calling (with the CSRF check) and the admin check. Nothing
else a request reaches reads the app's state."""

import secrets
from collections.abc import Callable, Coroutine, Iterator
from typing import Annotated, Any, TypeVar

import httpx
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Engine
from sqlmodel import Session
from starlette.requests import HTTPConnection

from app.agent_run_ends import RunEnds
from app.auth.callers import Identities
from app.auth.provider import Provider
from app.auth.sign_in_sessions import SESSION_COOKIE
from app.mcp_door import PooledDoor
from app.services import Services
from app.settings import Settings
from app.usecases.evaluations import Evaluator
from app.usecases.publish import Publisher
from app.usecases.statistics import Statistics
from app.usecases.submissions import SubmissionQueue
from app.usecases.validation import Validations
from catalog.space_health import SpaceHealth
from catalog.sync import Syncer
from catalog.tasksets import Tasksets
from conformance.checker import Checker
from core.callers import Access, Caller
from core.errors import ForbiddenError, UnauthorizedError
from core.sealing import EndpointTokens
from evals.agent_runs import AgentRuns
from evals.agent_sessions import AgentSessions
from evals.presets import ModelPresets
from evals.runs import Runner
from evals.store import EvaluationStore
from gateway.gate import client_of
from gateway.wiring import Gateway
from hosting.endpoints import EndpointManager
from hosting.reconcile import Keeper

T = TypeVar("T")


def get_services(connection: HTTPConnection) -> Services:
    """The providers' one source; handlers are given the parts they use, never this."""
    services: Services = connection.app.state.services
    return services


def _part(pick: Callable[[Services], T]) -> Callable[[HTTPConnection], Coroutine[Any, Any, T]]:
    """A provider of one part of envhub. It is a coroutine, so FastAPI calls it on the loop rather than sending
    a mere attribute read through its thread pool (a hop on every relayed request)."""

    async def provide(connection: HTTPConnection) -> T:
        return pick(get_services(connection))

    return provide


def get_session(connection: HTTPConnection) -> Iterator[Session]:
    with get_services(connection).db() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]
EngineDep = Annotated[Engine, Depends(_part(lambda s: s.engine))]
SettingsDep = Annotated[Settings, Depends(_part(lambda s: s.settings))]
SyncerDep = Annotated[Syncer, Depends(_part(lambda s: s.syncer))]
EndpointsDep = Annotated[EndpointManager, Depends(_part(lambda s: s.endpoints))]
KeeperDep = Annotated[Keeper, Depends(_part(lambda s: s.keeper))]
AccessDep = Annotated[Access, Depends(_part(lambda s: s.endpoints.access))]
EndpointTokensDep = Annotated[EndpointTokens, Depends(_part(lambda s: s.endpoint_tokens))]
CheckerDep = Annotated[Checker, Depends(_part(lambda s: s.checker))]
ValidationsDep = Annotated[Validations, Depends(_part(lambda s: s.validations))]
SpacesDep = Annotated[SpaceHealth, Depends(_part(lambda s: s.monitor.spaces))]
PublisherDep = Annotated[Publisher, Depends(_part(lambda s: s.publisher))]
TasksetsDep = Annotated[Tasksets, Depends(_part(lambda s: s.tasksets))]
PresetsDep = Annotated[ModelPresets, Depends(_part(lambda s: s.presets))]
EvaluationsDep = Annotated[EvaluationStore, Depends(_part(lambda s: s.evaluations))]
RunnerDep = Annotated[Runner, Depends(_part(lambda s: s.runner))]
EvaluatorDep = Annotated[Evaluator, Depends(_part(lambda s: s.evaluator))]
StatisticsDep = Annotated[Statistics, Depends(_part(lambda s: s.statistics))]
AgentsDep = Annotated[AgentSessions, Depends(_part(lambda s: s.agents))]
AgentRunsDep = Annotated[AgentRuns, Depends(_part(lambda s: s.agent_runs))]
RunEndsDep = Annotated[RunEnds, Depends(_part(lambda s: s.run_ends))]
IdentitiesDep = Annotated[Identities, Depends(_part(lambda s: s.identities))]
OAuthDep = Annotated[Provider, Depends(_part(lambda s: s.oauth))]
HttpDep = Annotated[httpx.AsyncClient | None, Depends(_part(lambda s: s.http))]  # envhub's own client, while it serves
SessionSecretDep = Annotated[bytes, Depends(_part(lambda s: s.session_secret))]
GatewayDep = Annotated[Gateway, Depends(_part(lambda s: s.gateway))]
DoorDep = Annotated[PooledDoor, Depends(_part(lambda s: s.door))]
SubmissionsDep = Annotated[SubmissionQueue, Depends(_part(lambda s: s.submissions))]

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


async def get_client(request: Request, caller: CallerDep, gateway: GatewayDep) -> str:
    """Whom a request's share of a limit counts against: the signed-in user, else its address, as for the gateway's
    queue."""
    peer = request.client.host if request.client else ""
    return client_of(request.headers, peer, caller.name, gateway.settings.behind_proxy)


ClientDep = Annotated[str, Depends(get_client)]


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
