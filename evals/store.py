"""Evaluation runs and their episodes as rows: what a run is, what it played (each episode's steps are stored as
they are played: evals/steps.py), and its summary over the episodes stored so far. The runs under way in a process
are its runner's (evals/runs.py)."""

from collections.abc import Callable, Collection
from itertools import islice
from typing import Any

from sqlalchemy import Engine, update
from sqlmodel import Session, col, select

from core.clock import utcnow
from core.errors import NotFoundError
from evals.models import UNDER_WAY, Episode, EpisodeBase, Evaluation, EvaluationBase, EvaluationPublic, EvaluationStatus
from evals.steps import EpisodeSteps
from evals.summary import EpisodeFigures, summarize
from rollout.episodes import EpisodeResult

__all__ = ["INTERRUPTED", "EvaluationStore", "episode_figures", "episode_id"]

INTERRUPTED = "envhub stopped while this ran; the episodes that finished are kept"


def episode_id(evaluation_id: str, index: int) -> str:
    return f"{evaluation_id}-{index}"


def _episode_row(evaluation_id: str, result: EpisodeResult) -> Episode:
    """The episode's figures; its records are its steps' rows, stored as it was played."""
    return Episode(
        id=episode_id(evaluation_id, result.spec.index),
        evaluation=evaluation_id,
        index=result.spec.index,
        seed=result.spec.seed,
        task=result.spec.task,
        status=result.status,
        error=result.error,
        code=result.code,
        reward=result.reward,
        final_reward=result.final_reward,
        success=result.success,
        steps=result.steps,
        invalid=result.invalid,
        tokens=result.tokens,
        wall_s=round(result.wall_s, 3),
    )


def episode_figures(row: EpisodeBase) -> EpisodeFigures:
    return EpisodeFigures(
        reward=row.reward,
        final_reward=row.final_reward,
        success=row.success,
        steps=row.steps,
        invalid=row.invalid,
        tokens=row.tokens,
        completed=row.status == "done",
    )


def _episodes_without_steps(session: Session, evaluation_id: str) -> list[EpisodeBase]:
    """A run's episodes in order, read without their steps (the bulk of a row)."""
    rows = session.exec(
        select(*[col(getattr(Episode, name)) for name in EpisodeBase.model_fields])
        .where(Episode.evaluation == evaluation_id)
        .order_by(col(Episode.index))
    ).all()
    return [EpisodeBase.model_validate(dict(zip(EpisodeBase.model_fields, r, strict=True))) for r in rows]


class EvaluationStore:
    """The runs on record, and their episodes with their steps; the rows this process writes name it (`instance`)."""

    def __init__(self, engine: Engine, instance: str = "") -> None:
        self.engine = engine
        self.instance = instance
        self.steps = EpisodeSteps(engine)

    def create(self, row: Evaluation) -> Evaluation:
        row.instance = self.instance
        with Session(self.engine, expire_on_commit=False) as session:
            session.add(row)
            session.commit()
        return row

    def get(self, evaluation_id: str) -> Evaluation:
        with Session(self.engine, expire_on_commit=False) as session:
            row = session.get(Evaluation, evaluation_id)
        if row is None:
            raise NotFoundError(f"no evaluation {evaluation_id!r}")
        return row

    def list_runs(
        self, shown: Callable[[Evaluation], bool], *, environment: str | None = None, limit: int = 100
    ) -> list[EvaluationBase]:
        """The newest `limit` runs that `shown` lets the caller see."""
        statement = select(Evaluation).order_by(col(Evaluation.created_at).desc())
        if environment is not None:
            statement = statement.where(Evaluation.environment == environment)
        with Session(self.engine) as session:
            # Read a page at a time: the runs left out do not count towards the limit.
            rows = session.exec(statement.execution_options(yield_per=limit))
            return [EvaluationBase.model_validate(r.model_dump()) for r in islice(filter(shown, rows), limit)]

    def public(self, evaluation_id: str) -> EvaluationPublic:
        row = self.get(evaluation_id)
        with Session(self.engine) as session:
            listed = _episodes_without_steps(session, evaluation_id)
        return EvaluationPublic.model_validate({**row.model_dump(), "episodes": listed})

    def episodes(self, evaluation_id: str) -> list[Episode]:
        self.get(evaluation_id)
        with Session(self.engine) as session:
            return list(
                session.exec(select(Episode).where(Episode.evaluation == evaluation_id).order_by(col(Episode.index)))
            )

    def list_under_way(self, owner: str | None) -> list[str]:
        """The ids of the owner's runs queued or running, in any envhub process; None: those nobody signed in owns."""
        mine = Evaluation.owner == owner if owner is not None else col(Evaluation.owner).is_(None)
        statement = select(Evaluation.id).where(mine, col(Evaluation.status).in_(UNDER_WAY))
        with Session(self.engine) as session:
            return list(session.exec(statement))

    def find_run_of(self, episode_id: str) -> Evaluation | None:
        with Session(self.engine, expire_on_commit=False) as session:
            episode = session.get(Episode, episode_id)
            return session.get(Evaluation, episode.evaluation) if episode is not None else None

    def episode(self, episode_id: str) -> Episode:
        with Session(self.engine) as session:
            row = session.get(Episode, episode_id)
        if row is None:
            raise NotFoundError(f"no episode {episode_id!r}")
        return row

    def update(self, evaluation_id: str, **values: Any) -> None:
        with Session(self.engine) as session:
            session.execute(update(Evaluation).where(col(Evaluation.id) == evaluation_id).values(**values))
            session.commit()

    def record(self, evaluation: Evaluation, result: EpisodeResult, wall_s: float) -> dict[str, Any]:
        """The episode's row, and the run's summary over every episode stored so far, in one write."""
        with Session(self.engine) as session:
            session.merge(_episode_row(evaluation.id, result))
            session.flush()
            figures = [episode_figures(episode) for episode in _episodes_without_steps(session, evaluation.id)]
            summary = summarize(figures, wall_s).as_dict()
            session.execute(update(Evaluation).where(col(Evaluation.id) == evaluation.id).values(summary=summary))
            session.commit()
        return summary

    def interrupt_orphans(self, live_instances: set[str], running_here: Collection[str]) -> int:
        """Mark interrupted the runs left under way by envhub processes that are gone (or by this one, when it
        does not run them: `running_here` are those it runs); their finished episodes stay."""
        with Session(self.engine) as session:
            rows = session.exec(select(Evaluation).where(col(Evaluation.status).in_(UNDER_WAY))).all()
            orphans = [
                r.id
                for r in rows
                if (r.instance == self.instance and r.id not in running_here)
                or (r.instance != self.instance and r.instance not in live_instances)
            ]
            if orphans:
                session.execute(
                    update(Evaluation)
                    .where(col(Evaluation.id).in_(orphans))
                    .values(status=EvaluationStatus.INTERRUPTED, message=INTERRUPTED, finished_at=utcnow())
                )
                session.commit()
        return len(orphans)
