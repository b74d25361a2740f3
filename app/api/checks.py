"""POST /api/checks: check a URL, an endpoint or an environment against the OpenEnv protocol; GET: the reports."""

import asyncio
import re
from typing import Annotated, Self
from urllib.parse import urlsplit

from fastapi import APIRouter, Query, Request, status
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlmodel import Session

from app.api.deps import CheckerDep, EndpointsDep, SessionDep, SettingsDep
from app.gateway import gateway_url
from app.settings import Settings
from catalog.models import EnvironmentDetail, Source
from catalog.store import get_environment
from conformance.checker import get_report, list_reports
from conformance.models import CheckReportPublic, CheckReportsPublic
from core.errors import ConflictError, InvalidInputError
from hosting.models import EndpointStatus

router = APIRouter(prefix="/api/checks", tags=["checks"])

_GATEWAY_PATH = re.compile(r"^/endpoints/(?P<id>[A-Za-z0-9_-]{1,64})/?$")


class CheckRequest(BaseModel):
    """What to check: exactly one of a URL, an endpoint id or an environment id."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(default=None, max_length=2048, description="the base URL of an OpenEnv server")
    endpoint: str | None = Field(default=None, max_length=64, description="an endpoint launched by envhub")
    environment: str | None = Field(default=None, max_length=300, description="a Hub Space or registered URL")

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if sum(v is not None for v in (self.url, self.endpoint, self.environment)) != 1:
            raise ValueError("give exactly one of url, endpoint and environment")
        return self


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def own_endpoint(url: str, request: Request, settings: Settings) -> str | None:
    """The endpoint id when url is one of this server's gateway URLs."""
    parts = urlsplit(url.strip())
    match = _GATEWAY_PATH.match(parts.path)
    if match is None or parts.query:
        return None
    origins = {_origin(str(request.base_url)), _origin(gateway_url(request, "x"))}
    if settings.public_url:
        origins.add(_origin(settings.public_url))
    return match["id"] if _origin(url.strip()) in origins else None


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_check(
    body: CheckRequest, request: Request, settings: SettingsDep, checker: CheckerDep, manager: EndpointsDep
) -> CheckReportPublic:
    """Run the conformance checklist now (up to 30 s) and file the report."""
    endpoint_id = body.endpoint or (own_endpoint(body.url, request, settings) if body.url else None)
    if endpoint_id is not None:
        endpoint = await asyncio.to_thread(manager.get, endpoint_id)
        if endpoint.status != EndpointStatus.RUNNING:
            raise ConflictError(f"endpoint {endpoint.id} is {endpoint.status.value}; only a running one can be checked")
        url = gateway_url(request, endpoint.id)
        filed = await checker.check(url, environment=endpoint.environment, endpoint=endpoint.id, trusted=(url,))
        await asyncio.to_thread(manager.note_conformance, endpoint.id, filed.report.summary(filed.id))
        return filed
    if body.environment is not None:
        environment = await asyncio.to_thread(_environment, request, body.environment)
        if environment.source == Source.TEMPLATE or not environment.host:
            raise InvalidInputError(
                f"{environment.id} runs nowhere until it is launched: POST /api/endpoints, then check the endpoint"
            )
        return await checker.check(environment.host, environment=environment.id)
    assert body.url is not None
    return await checker.check(body.url)


def _environment(request: Request, environment_id: str) -> EnvironmentDetail:
    with Session(request.app.state.engine) as session:
        return get_environment(session, environment_id)


@router.get("")
def read_checks(
    session: SessionDep,
    environment: str | None = None,
    endpoint: str | None = None,
    limit: Annotated[int, Query(ge=1, le=50)] = 10,
) -> CheckReportsPublic:
    """Reports, newest first, of one environment or endpoint."""
    data, count = list_reports(session, environment=environment, endpoint=endpoint, limit=limit)
    return CheckReportsPublic(data=data, count=count)


@router.get("/{report_id}")
def read_check(session: SessionDep, report_id: int) -> CheckReportPublic:
    return get_report(session, report_id)
