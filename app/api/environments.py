"""GET /api/environments: search the catalog; GET /api/environments/{id}: one environment."""

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import SessionDep
from catalog.models import EnvironmentDetail, EnvironmentsPublic, Source
from catalog.search import EnvironmentQuery, Sort, get_environment, search_environments

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
    sort: Sort = Sort.RELEVANCE,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Annotated[int, Query(ge=0, le=100_000)] = 0,
) -> EnvironmentsPublic:
    query = EnvironmentQuery(
        q=q, tags=tag, author=author, source=source, sdk=sdk, stage=stage, sort=sort, limit=limit, offset=offset
    )
    data, count = search_environments(session, query)
    return EnvironmentsPublic(data=data, count=count)


@router.get("/{environment_id:path}")
def read_environment(session: SessionDep, environment_id: str) -> EnvironmentDetail:
    return get_environment(session, environment_id)
