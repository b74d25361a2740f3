"""The board for hackathons: submit a Space pinned at its revision, follow the submission, read the ranking."""

from typing import Annotated

from fastapi import APIRouter, Query, Response, status
from pydantic import BaseModel, ConfigDict, Field

from app.api.deps import CallerDep, SessionDep, SubmissionsDep
from catalog.submissions import BoardRow, SubmissionPublic, board, get_submission
from core.errors import NotFoundError

router = APIRouter(prefix="/api", tags=["board"])


class SubmissionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    space: str = Field(max_length=300, description="a Hub Space in the catalog, owner/name")
    revision: str | None = Field(
        default=None, max_length=64, description="its commit sha (7 or more characters); by default the catalog's"
    )


class BoardPublic(BaseModel):
    data: list[BoardRow]
    count: int


@router.post("/submissions", status_code=status.HTTP_201_CREATED)
async def create_submission(
    body: SubmissionRequest, response: Response, queue: SubmissionsDep, caller: CallerDep
) -> SubmissionPublic:
    """Queue the Space at its revision for the board (201), or give back that revision's submission (200): a
    revision's result is made once."""
    submission, created = await queue.submit(body.space, body.revision, caller)
    if not created:
        response.status_code = status.HTTP_200_OK
    return SubmissionPublic.model_validate(submission)


@router.get("/submissions/{submission_id}")
def read_submission(submission_id: int, session: SessionDep) -> SubmissionPublic:
    found = get_submission(session, submission_id)
    if found is None:
        raise NotFoundError(f"no submission {submission_id}; submit a Space with POST /api/submissions")
    return SubmissionPublic.model_validate(found)


@router.get("/board")
def read_board(session: SessionDep, limit: Annotated[int, Query(ge=1, le=500)] = 100) -> BoardPublic:
    """Each Space's newest finished submission, ranked by verdict, then by training signal."""
    rows = board(session, limit)
    return BoardPublic(data=rows, count=len(rows))
