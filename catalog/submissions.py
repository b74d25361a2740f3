"""Board submissions: a Hub Space pinned at a revision, queued, checked stage by stage, and ranked on the board.

A revision's submission is made once and kept: submitting it again gives the same row back. Rows are claimed by one
envhub instance at a time (`claim`); those an instance left running when it stopped are queued again (`requeue`).
"""

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Engine, UniqueConstraint, func, select, update
from sqlmodel import JSON, AutoString, Field, Session, SQLModel, col

from catalog.models import BoardSummary, Environment, Verdict
from core.clock import utcnow
from core.db import exclusive
from core.errors import TooManyRequestsError

__all__ = [
    "BoardRow",
    "Submission",
    "SubmissionPublic",
    "SubmissionStatus",
    "board",
    "claim",
    "finish",
    "get_submission",
    "note",
    "requeue",
    "submit",
]

SUBMISSIONS_LOCK = 0x656E76687562 + 0x53  # the advisory lock (core.db.exclusive) under which submissions are counted


class SubmissionStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class SubmissionBase(SQLModel):
    id: int | None = Field(default=None, primary_key=True)
    space: str = Field(index=True, description="the Hub Space")
    revision: str = Field(description="the commit sha it was submitted at")
    submitter: str | None = Field(default=None, index=True, description="who submitted it; None: nobody signed in")
    status: SubmissionStatus = Field(default=SubmissionStatus.QUEUED, index=True, sa_type=AutoString)
    stage: str | None = Field(default=None, description="the stage running, or where it failed")
    verdict: Verdict | None = Field(default=None, sa_type=AutoString, description="the worst of its stages' verdicts")
    code: str | None = Field(default=None, description="a failed submission's error code")
    message: str = Field(default="queued", description="what happened last, and what to do when it failed")
    reports: dict[str, list[int]] = Field(default_factory=dict, sa_type=JSON, description="report ids by stage")
    training_signal: float | None = Field(
        default=None, description="the reference model's share of expected GRPO groups with a non-zero advantage"
    )
    headroom: float | None = Field(default=None, description="how far the best non-oracle player stays below the max")
    gameability_gap: float | None = Field(default=None, description="the best adversarial score's gap to the honest")
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None


class Submission(SubmissionBase, table=True):
    __table_args__ = (UniqueConstraint("space", "revision", name="uq_submission_space_revision"),)

    endpoint: str | None = Field(default=None, description="the endpoint its hub lane runs on, while it runs")
    instance: str | None = Field(default=None, description="the envhub instance running it")


class SubmissionPublic(SubmissionBase):
    id: int


class BoardRow(SQLModel):
    """A Space on the board: its newest finished submission."""

    rank: int
    space: str
    revision: str
    submission: int
    status: SubmissionStatus
    verdict: Verdict | None
    training_signal: float | None
    headroom: float | None
    gameability_gap: float | None
    finished_at: datetime


def submit(engine: Engine, space: str, revision: str, submitter: str | None, per_user: int) -> tuple[Submission, bool]:
    """The revision's submission, made now (True) unless it was before; a new one counts against the submitter's
    queued and running submissions (nobody signed in shares one allowance)."""
    with exclusive(engine, SUBMISSIONS_LOCK) as connection, Session(bind=connection) as session:
        found = session.execute(
            select(Submission).where(col(Submission.space) == space, col(Submission.revision) == revision)
        ).scalar_one_or_none()
        if found is not None:
            return found, False
        mine = col(Submission.submitter).is_(None) if submitter is None else col(Submission.submitter) == submitter
        waiting = session.execute(
            select(func.count())
            .select_from(Submission)
            .where(mine, col(Submission.status).in_([SubmissionStatus.QUEUED, SubmissionStatus.RUNNING]))
        ).scalar_one()
        if waiting >= per_user:
            raise TooManyRequestsError(
                f"you have {waiting} submissions queued or running, the most allowed; "
                "submit again once one has finished (GET /api/submissions/{id})",
                code="submissions_limit",
            )
        row = Submission(space=space, revision=revision, submitter=submitter)
        session.add(row)
        session.flush()
        session.refresh(row)
        session.expunge(row)
        return row, True


def get_submission(session: Session, submission_id: int) -> Submission | None:
    return session.get(Submission, submission_id)


def claim(engine: Engine, instance: str) -> Submission | None:
    """The oldest queued submission, now running on this instance; None when none waits (or another took it)."""
    with Session(engine) as session:
        oldest = session.execute(
            select(col(Submission.id))
            .where(col(Submission.status) == SubmissionStatus.QUEUED)
            .order_by(col(Submission.id))
            .limit(1)
        ).scalar_one_or_none()
        if oldest is None:
            return None
        taken = session.execute(
            update(Submission)
            .where(col(Submission.id) == oldest, col(Submission.status) == SubmissionStatus.QUEUED)
            .values(status=SubmissionStatus.RUNNING, instance=instance, started_at=utcnow(), message="starting")
        )
        session.commit()
        if taken.rowcount != 1:  # type: ignore[attr-defined]
            return None
        return session.get(Submission, oldest)


def note(engine: Engine, submission_id: int, **values: Any) -> None:
    """Write what a running submission reached: its stage, message, endpoint, reports."""
    with Session(engine) as session:
        session.execute(update(Submission).where(col(Submission.id) == submission_id).values(**values))
        session.commit()


def finish(engine: Engine, submission_id: int, **values: Any) -> Submission:
    """End a submission (done or failed, with its verdict or code), and show it on its Space's catalog entry."""
    with Session(engine) as session:
        row = session.get(Submission, submission_id)
        assert row is not None
        row.sqlmodel_update(values | {"finished_at": utcnow(), "endpoint": None})
        session.add(row)
        environment = session.get(Environment, row.space)
        if environment is not None and row.finished_at is not None:
            summary = BoardSummary(
                submission=submission_id,
                revision=row.revision,
                status=str(row.status),
                verdict=row.verdict,
                training_signal=row.training_signal,
                finished_at=row.finished_at,
            )
            environment.board = summary.model_dump(mode="json")
            session.add(environment)
        session.commit()
        session.refresh(row)
        return row


def requeue(engine: Engine, live_instances: set[str]) -> list[Submission]:
    """Queue again the submissions left running by instances that are gone; they return with the endpoints they
    had, for the queue to stop."""
    with Session(engine) as session:
        left = list(
            session.execute(
                select(Submission).where(
                    col(Submission.status) == SubmissionStatus.RUNNING,
                    col(Submission.instance).is_(None) | col(Submission.instance).not_in(live_instances),
                )
            ).scalars()
        )
        for row in left:
            row.status, row.instance, row.message = SubmissionStatus.QUEUED, None, "queued again: envhub restarted"
            session.add(row)
        session.commit()
        for row in left:
            session.refresh(row)
            session.expunge(row)
        return left


_VERDICT_RANK = {Verdict.PASS: 0, Verdict.WARN: 1, Verdict.FAIL: 2, None: 3}


def _ranking(row: Submission) -> tuple[int, float, str]:
    """Verdict first; then the higher training signal, one not measured after any measured."""
    signal = row.training_signal if row.training_signal is not None else -1.0
    return _VERDICT_RANK[row.verdict], -signal, row.space


def board(session: Session, limit: int = 100) -> list[BoardRow]:
    """Each Space's newest finished submission, ranked by verdict (a failed run last), then by training signal."""
    finished = session.execute(
        select(Submission)
        .where(col(Submission.status).in_([SubmissionStatus.DONE, SubmissionStatus.FAILED]))
        .order_by(col(Submission.finished_at).desc(), col(Submission.id).desc())
    ).scalars()
    newest: dict[str, Submission] = {}
    for row in finished:
        newest.setdefault(row.space, row)
    ranked = sorted(newest.values(), key=_ranking)
    return [
        BoardRow(
            rank=number,
            space=row.space,
            revision=row.revision,
            submission=row.id or 0,
            status=row.status,
            verdict=row.verdict,
            training_signal=row.training_signal,
            headroom=row.headroom,
            gameability_gap=row.gameability_gap,
            finished_at=row.finished_at or row.created_at,
        )
        for number, row in enumerate(ranked[:limit], start=1)
    ]
