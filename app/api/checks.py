"""POST /api/checks: check a URL, an endpoint or an environment against the OpenEnv protocol, or run a quality
report of it; GET: the reports."""

import asyncio
from typing import Annotated, Self

from fastapi import APIRouter, Query, Request, status
from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api.deps import (
    CallerDep,
    CheckerDep,
    EndpointsDep,
    EndpointTokensDep,
    EngineDep,
    SessionDep,
    SettingsDep,
)
from app.urls import own_endpoint, own_gateway
from app.usecases.quality import hosted, server_capacity
from catalog.models import Source
from catalog.store import load_environment
from conformance.checker import get_report, list_reports
from conformance.models import CheckReportPublic, CheckReportsPublic, FiledReport, Suite
from core.errors import ConflictError, InvalidInputError, NotFoundError
from hosting.models import EndpointStatus

router = APIRouter(prefix="/api/checks", tags=["checks"])


class CheckRequest(BaseModel):
    """What to check: exactly one of a URL, an endpoint id or an environment id."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(default=None, max_length=2048, description="the base URL of an OpenEnv server")
    endpoint: str | None = Field(default=None, max_length=64, description="an endpoint launched by envhub")
    environment: str | None = Field(default=None, max_length=300, description="a Hub Space or registered URL")
    suite: Suite = Field(default=Suite.PROTOCOL, description="protocol: the conformance checklist; quality: a report")

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if sum(v is not None for v in (self.url, self.endpoint, self.environment)) != 1:
            raise ValueError("give exactly one of url, endpoint and environment")
        if self.suite not in (Suite.PROTOCOL, Suite.QUALITY):
            raise ValueError(f"suite is protocol or quality here; the {self.suite.value} lane has its own request")
        return self


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_check(
    body: CheckRequest,
    request: Request,
    checker: CheckerDep,
    manager: EndpointsDep,
    tokens: EndpointTokensDep,
    settings: SettingsDep,
    engine: EngineDep,
    caller: CallerDep,
) -> CheckReportPublic:
    """Run the conformance checklist (up to 30 s) or a quality report (up to 60 s) now, and file the report.

    A private endpoint is checked for its owner and the admin only."""
    quality = body.suite == Suite.QUALITY
    endpoint_id = body.endpoint or (own_endpoint(body.url, settings, request) if body.url else None)
    if endpoint_id is not None:
        endpoint = await asyncio.to_thread(manager.get, endpoint_id)
        if not manager.access.may_use(caller, endpoint.owner, private=endpoint.private):
            raise NotFoundError(f"no endpoint {endpoint_id!r}; list them with GET /api/endpoints")
        if endpoint.status != EndpointStatus.RUNNING:
            raise ConflictError(f"endpoint {endpoint.id} is {endpoint.status.value}; only a running one can be checked")
        url = own_gateway(request, endpoint.id)
        credentials = tokens.header(endpoint.id)
        if quality:
            known = await asyncio.to_thread(hosted, manager, endpoint)
            return await checker.check_quality(
                url,
                environment=endpoint.environment,
                endpoint=endpoint.id,
                revision=endpoint.revision,
                trusted=(url,),
                credentials=credentials,
                **known,
            )
        filed = await checker.check(
            url,
            environment=endpoint.environment,
            endpoint=endpoint.id,
            trusted=(url,),
            credentials=credentials,
            server_capacity=server_capacity(manager, endpoint.id),
        )
        await asyncio.to_thread(manager.note_conformance, endpoint.id, filed.report.conformance_summary(filed.id))
        return filed
    if body.environment is not None:
        environment = await asyncio.to_thread(load_environment, engine, body.environment)
        if environment.source == Source.TEMPLATE or not environment.host:
            raise InvalidInputError(
                f"{environment.id} runs nowhere until it is launched: POST /api/endpoints, then check the endpoint",
                code="not_launched",
            )
        if quality:
            return await checker.check_quality(environment.host, environment=environment.id)
        return await checker.check(environment.host, environment=environment.id)
    assert body.url is not None
    return await (checker.check_quality(body.url) if quality else checker.check(body.url))


@router.get("")
def read_checks(
    session: SessionDep,
    environment: str | None = None,
    endpoint: str | None = None,
    suite: Suite | None = None,
    limit: Annotated[int, Query(ge=1, le=50)] = 10,
) -> CheckReportsPublic:
    """Reports, newest first, of one environment or endpoint, of one suite or both."""
    data, count = list_reports(session, environment=environment, endpoint=endpoint, suite=suite, limit=limit)
    return CheckReportsPublic(data=data, count=count)


@router.get("/{report_id}")
def read_check(session: SessionDep, report_id: int) -> FiledReport:
    return get_report(session, report_id)
