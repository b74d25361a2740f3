"""openenv's validator on an environment: POST runs it (its folder up to a level, or a running server's URL) and
files the report under the environment's revision; GET lists the reports of every revision, or reads one."""

from typing import Annotated

from fastapi import APIRouter, Query, status
from pydantic import BaseModel, ConfigDict, Field

from app.api.deps import AccessDep, CallerDep, SessionDep, ValidationsDep
from conformance.models import ValidatorReportPublic, ValidatorSuite
from conformance.validator import ValidationLevel, get_validation, list_validations

router = APIRouter(tags=["validation"])


class ValidationRequest(BaseModel):
    """The folder up to a level, or, with `url`, a running server of the environment."""

    model_config = ConfigDict(extra="forbid")

    level: ValidationLevel = Field(
        default=ValidationLevel.STATIC, description="static, runtime or semantic: the deepest level run"
    )
    url: str | None = Field(
        default=None, max_length=2048, description="a running server's base URL: `openenv validate --url`'s report"
    )


class ValidationsPublic(BaseModel):
    data: list[ValidatorReportPublic]
    count: int


@router.post("/api/environments/{environment_id:path}/validation", status_code=status.HTTP_201_CREATED)
async def validate_environment(
    environment_id: str,
    validations: ValidationsDep,
    access: AccessDep,
    caller: CallerDep,
    body: ValidationRequest | None = None,
) -> ValidatorReportPublic:
    """Run openenv's validator now (bounded by ENVHUB_VALIDATOR_TIMEOUT_S) and file its report unchanged.

    Whoever may launch may validate: the deeper levels build and run the environment."""
    access.ensure_may_launch(caller)
    body = body or ValidationRequest()
    if body.url is not None:
        return await validations.validate_url(environment_id, body.url)
    return await validations.validate(environment_id, level=body.level, token=caller.token)


@router.get("/api/environments/{environment_id:path}/validation")
def read_validations(
    environment_id: str,
    session: SessionDep,
    suite: ValidatorSuite | None = None,
    limit: Annotated[int, Query(ge=1, le=50)] = 10,
) -> ValidationsPublic:
    """The environment's validator reports, newest first, of every revision it had."""
    data, count = list_validations(session, environment_id, suite=suite, limit=limit)
    return ValidationsPublic(data=data, count=count)


@router.get("/api/validation/{report_id}")
def read_validation(session: SessionDep, report_id: int) -> ValidatorReportPublic:
    return get_validation(session, report_id)
