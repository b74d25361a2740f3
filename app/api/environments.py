"""GET /api/environments: search the catalog; GET /api/environments/{id}: one environment.

POST /api/environments registers a self-hosted endpoint by URL; POST .../{id}/wake wakes a sleeping Space.
"""

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Response, status
from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session

from app.api.deps import (
    AccessDep,
    CallerDep,
    CheckerDep,
    ClientDep,
    EngineDep,
    SessionDep,
    SettingsDep,
    SpacesDep,
    TasksetsDep,
)
from app.usecases.evaluations import run_shown
from catalog.models import EnvironmentDetail, EnvironmentsPublic, Health, Source, Verdict
from catalog.revisions import RevisionPublic, RevisionsPublic, revisions_of
from catalog.search import EnvironmentQuery, Sort, search_environments
from catalog.store import cached_interface, get_environment
from catalog.tasksets import EnvironmentTasksets, environment_tasksets
from conformance.register import register_url
from evals.leaderboard import leaderboard
from evals.models import Leaderboard

router = APIRouter(prefix="/api/environments", tags=["environments"])


@router.get("")
def list_environments(
    session: SessionDep,
    q: Annotated[str, Query(max_length=500, description="words to find")] = "",
    tag: Annotated[list[str], Query(max_length=20, description="repeat to require several tags")] = [],  # noqa: B006
    author: str | None = None,
    source: Source | None = None,
    sdk: str | None = None,
    stage: Annotated[str | None, Query(description="runtime stage, e.g. RUNNING")] = None,
    conforms: Annotated[bool, Query(description="only environments whose last check passed every core check")] = False,
    up: Annotated[bool, Query(description="only environments the health monitor last saw up")] = False,
    has_tools: Annotated[bool, Query(description="only environments with MCP tools")] = False,
    has_tasks: Annotated[bool, Query(description="only environments serving the Task API")] = False,
    quality: Annotated[
        list[Verdict], Query(max_length=3, description="the last quality report's verdict; repeat for several")
    ] = [],  # noqa: B006
    teaches: Annotated[
        bool, Query(description="only environments whose newest board verdict is pass or warn, with a training signal")
    ] = False,
    sort: Sort = Sort.RELEVANCE,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Annotated[int, Query(ge=0, le=100_000)] = 0,
) -> EnvironmentsPublic:
    query = EnvironmentQuery(
        q=q,
        tags=tag,
        author=author,
        source=source,
        sdk=sdk,
        stage=stage,
        has_tools=has_tools,
        has_tasks=has_tasks,
        conforms=conforms,
        up=up,
        quality=quality,
        teaches=teaches,
        sort=sort,
        limit=limit,
        offset=offset,
    )
    data, count = search_environments(session, query)
    return EnvironmentsPublic(data=data, count=count)


class RegisterRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(max_length=2048, description="the base URL of a self-hosted OpenEnv server")


@router.post("", status_code=status.HTTP_201_CREATED)
async def register_environment(
    body: RegisterRequest, response: Response, checker: CheckerDep, settings: SettingsDep
) -> EnvironmentDetail:
    """Add a self-hosted endpoint (source "url") once its core checks pass; 422 with the failing checks if not."""
    environment, created = await register_url(checker, body.url, probe_timeout_s=settings.health_timeout_s)
    if not created:
        response.status_code = status.HTTP_200_OK
    return environment


@router.get("/{environment_id:path}/leaderboard")
def read_leaderboard(
    session: SessionDep, engine: EngineDep, access: AccessDep, caller: CallerDep, environment_id: str
) -> Leaderboard:
    """The environment's evaluations, best first, grouped by what they compare on (revision and task set); a
    private endpoint's for its owner and the admin only."""
    return leaderboard(engine, get_environment(session, environment_id).id, run_shown(access, caller))


@router.get("/{environment_id:path}/revisions")
def read_revisions(session: SessionDep, environment_id: str) -> RevisionsPublic:
    """Every revision the catalog has seen of the environment, newest first; pin one as `id@<revision>`."""
    environment = get_environment(session, environment_id)
    seen = revisions_of(session, environment.id)
    current = environment.latest or environment.sha
    data = [RevisionPublic.model_validate(r, update={"current": r.revision == current}) for r in seen]
    return RevisionsPublic(environment=environment.id, current=current, data=data)


@router.get("/{environment_id:path}/tasksets")
async def read_tasksets(
    engine: EngineDep, tasksets: TasksetsDep, client: ClientDep, environment_id: str
) -> EnvironmentTasksets:
    """What it can be evaluated on: its Task API splits (as last read from its server) and its linked
    datasets at their pinned revisions, with row counts and a preview of rows; the dataset files it downloads
    count against the caller's hourly allowance."""

    def read() -> EnvironmentTasksets:
        with Session(engine) as session:
            environment = get_environment(session, environment_id)
            return environment_tasksets(session, tasksets, environment, cached_interface(environment), client)

    return await asyncio.to_thread(read)


@router.get("/{environment_id:path}")
def read_environment(session: SessionDep, environment_id: str) -> EnvironmentDetail:
    return get_environment(session, environment_id)


@router.post("/{environment_id:path}/wake", status_code=status.HTTP_202_ACCEPTED)
async def wake_environment(environment_id: str, spaces: SpacesDep) -> Health:
    """Wake a sleeping Space (the monitor never does by itself); follow its health until it answers."""
    return await spaces.wake(environment_id)
