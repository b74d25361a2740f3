"""Evaluation runs: a policy plays a run's episodes through the harness, K at a time, and each episode
is stored as it finishes, with the run's summary, so a crash loses at most the episodes in flight.

The caller (the API or the CLI) resolves where the run plays (a URL and the outbound session to
reach it) and what to do afterwards (stop an endpoint it launched); the runner only plays.
"""

import asyncio
import logging
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, func, update
from sqlmodel import Session, col, select

from core.clock import utcnow
from core.errors import NotFoundError, TooManyRequestsError
from core.outbound import OutboundSession
from evals.models import UNDER_WAY, Episode, EpisodeBase, Evaluation, EvaluationBase, EvaluationPublic, EvaluationStatus
from evals.summary import EpisodeFigures, summarize
from rollout.episodes import EpisodeResult, EpisodeSpec, Limits, play_episode
from rollout.harness import Brief
from rollout.players import Policy

__all__ = ["Play", "PrepareError", "Runner", "episode_row", "new_evaluation_id"]

log = logging.getLogger(__name__)

Progress = Callable[[Evaluation, EpisodeResult], None]


def new_evaluation_id() -> str:
    return "ev-" + secrets.token_hex(5)


@dataclass
class Play:
    """Everything one run plays with."""

    url: str
    outbound: OutboundSession
    policy: Policy
    brief: Brief
    specs: Sequence[EpisodeSpec]
    limits: Limits
    concurrency: int
    after: Callable[[], Awaitable[None]] | None = None  # e.g. stop the endpoint launched for the run


def episode_row(evaluation_id: str, result: EpisodeResult) -> Episode:
    return Episode(
        id=f"{evaluation_id}-{result.spec.index}",
        evaluation=evaluation_id,
        index=result.spec.index,
        seed=result.spec.seed,
        task=result.spec.task,
        status=result.status,
        error=result.error,
        reward=result.reward,
        final_reward=result.final_reward,
        success=result.success,
        steps=result.step_count,
        invalid=result.invalid,
        tokens=result.tokens,
        wall_s=round(result.wall_s, 3),
        records=result.steps,
    )


def _figures(row: EpisodeBase) -> EpisodeFigures:
    return EpisodeFigures(
        reward=row.reward,
        final_reward=row.final_reward,
        success=row.success,
        steps=row.steps,
        invalid=row.invalid,
        tokens=row.tokens,
        completed=row.status == "done",
    )


class PrepareError(Exception):
    """A run could not start: its endpoint did not start, or its environment did not answer."""


def _episodes_without_steps(session: Session, evaluation_id: str) -> list[EpisodeBase]:
    """A run's episodes in order, read without their steps (the bulk of a row)."""
    rows = session.exec(
        select(*[col(getattr(Episode, name)) for name in EpisodeBase.model_fields])
        .where(Episode.evaluation == evaluation_id)
        .order_by(col(Episode.index))
    ).all()
    return [EpisodeBase.model_validate(dict(zip(EpisodeBase.model_fields, r, strict=True))) for r in rows]


class Runner:
    """The runs under way in this envhub process, and their rows."""

    def __init__(self, engine: Engine, instance: str = "") -> None:
        self.engine = engine
        self.instance = instance
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopping = False
        self._starting: Counter[str | None] = Counter()  # runs being started, by owner, not yet on record

    # -- rows

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

    def list_runs(self, *, environment: str | None = None, limit: int = 100) -> list[EvaluationBase]:
        statement = select(Evaluation).order_by(col(Evaluation.created_at).desc()).limit(limit)
        if environment is not None:
            statement = statement.where(Evaluation.environment == environment)
        with Session(self.engine) as session:
            return [EvaluationBase.model_validate(r.model_dump()) for r in session.exec(statement)]

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

    @contextmanager
    def slot(self, owner: str | None, most: int | None) -> Iterator[None]:
        """Hold one of the owner's `most` runs at once while a run is started (None: no cap), until it is on record
        or given up; TooManyRequestsError when the owner has them all."""
        if most is not None:
            under_way = self.list_under_way(owner)
            if len(under_way) + self._starting[owner] >= most:
                who = owner or "everyone not signed in"
                raise TooManyRequestsError(
                    f"{who} may run {most} evaluations at once on this server (ENVHUB_MAX_EVALUATIONS_PER_OWNER), "
                    f"and {len(under_way) + self._starting[owner]} are queued or running"
                    + (f" ({', '.join(under_way)})" if under_way else "")
                    + ": wait for one to finish, or cancel one with DELETE /api/evaluations/{id}",
                    code="evaluations_at_once",
                )
        self._starting[owner] += 1
        try:
            yield
        finally:
            self._starting[owner] -= 1

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

    def _update(self, evaluation_id: str, **values: Any) -> None:
        with Session(self.engine) as session:
            session.execute(update(Evaluation).where(col(Evaluation.id) == evaluation_id).values(**values))
            session.commit()

    def record(self, evaluation: Evaluation, result: EpisodeResult, wall_s: float) -> dict[str, Any]:
        """The episode's row, and the run's summary over every episode stored so far, in one write."""
        with Session(self.engine) as session:
            session.merge(episode_row(evaluation.id, result))
            session.flush()
            figures = [_figures(episode) for episode in _episodes_without_steps(session, evaluation.id)]
            summary = summarize(figures, wall_s).as_dict()
            session.execute(update(Evaluation).where(col(Evaluation.id) == evaluation.id).values(summary=summary))
            session.commit()
        return summary

    # -- running

    def start(
        self, evaluation: Evaluation, prepare: Callable[[], Awaitable[Play]], progress: Progress | None = None
    ) -> asyncio.Task[None]:
        """Run in the background: `prepare` readies what it plays with (it may launch an endpoint and wait
        for it); a PrepareError from it fails the run with its message."""
        task = asyncio.create_task(self._run(evaluation, prepare, progress), name=f"evaluation {evaluation.id}")
        self._tasks[evaluation.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(evaluation.id, None))
        return task

    def running(self, evaluation_id: str) -> bool:
        return evaluation_id in self._tasks

    async def _run(
        self, evaluation: Evaluation, prepare: Callable[[], Awaitable[Play]], progress: Progress | None
    ) -> None:
        try:
            play = await prepare()
        except asyncio.CancelledError:
            self._ended(evaluation.id, EvaluationStatus.CANCELLED, "cancelled before it started")
            raise
        except PrepareError as exc:
            self._ended(evaluation.id, EvaluationStatus.FAILED, str(exc))
            return
        loop = asyncio.get_running_loop()
        started = loop.time()
        self._update(evaluation.id, status=EvaluationStatus.RUNNING, started_at=utcnow(), message="")
        slots = asyncio.Semaphore(play.concurrency)

        async def one(spec: EpisodeSpec) -> None:
            async with slots:
                result = await play_episode(
                    play.url,
                    play.outbound,
                    play.policy,
                    play.brief,
                    spec,
                    play.limits,
                    player_name=f"envhub evaluation {evaluation.id}",
                )
            evaluation.summary = await asyncio.to_thread(self.record, evaluation, result, loop.time() - started)
            if progress is not None:
                progress(evaluation, result)

        status, message = EvaluationStatus.FINISHED, ""
        try:
            await asyncio.gather(*(one(spec) for spec in play.specs))
        except asyncio.CancelledError:
            status, message = EvaluationStatus.CANCELLED, "cancelled; the episodes that finished are kept"
            if self._stopping:
                status, message = (
                    EvaluationStatus.INTERRUPTED,
                    "envhub stopped while this ran; the episodes that finished are kept",
                )
            raise
        except Exception as exc:
            log.exception("evaluation %s failed", evaluation.id)
            status, message = EvaluationStatus.FAILED, f"the run failed: {type(exc).__name__}: {exc}"
        finally:
            self._ended(evaluation.id, status, message)
            await asyncio.shield(self._close(play))

    def _ended(self, evaluation_id: str, status: EvaluationStatus, message: str) -> None:
        self._update(evaluation_id, status=status, message=message, finished_at=utcnow())

    async def _close(self, play: Play) -> None:
        try:
            await play.policy.aclose()
            await play.outbound.aclose()
            if play.after is not None:
                await play.after()
        except Exception:
            log.exception("cleaning up after an evaluation failed")

    async def cancel(self, evaluation_id: str) -> bool:
        """Cancel a run under way here and wait for it to end; False when it does not run in this process."""
        task = self._tasks.get(evaluation_id)
        if task is None:
            return False
        task.cancel()
        await asyncio.wait([task], timeout=30)
        return True

    async def stop(self) -> None:
        """envhub is stopping: every run here ends interrupted, its finished episodes kept."""
        self._stopping = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def interrupt_orphans(self, live_instances: set[str]) -> int:
        """Mark interrupted the runs left under way by envhub processes that are gone (or by this one,
        when it is not running them); their finished episodes stay."""
        with Session(self.engine) as session:
            rows = session.exec(select(Evaluation).where(col(Evaluation.status).in_(UNDER_WAY))).all()
            orphans = [
                r.id
                for r in rows
                if (r.instance == self.instance and r.id not in self._tasks)
                or (r.instance != self.instance and r.instance not in live_instances)
            ]
            if orphans:
                session.execute(
                    update(Evaluation)
                    .where(col(Evaluation.id).in_(orphans))
                    .values(
                        status=EvaluationStatus.INTERRUPTED,
                        message="envhub stopped while this ran; the episodes that finished are kept",
                        finished_at=utcnow(),
                    )
                )
                session.commit()
        return len(orphans)

    def count_episodes(self, evaluation_id: str) -> int:
        with Session(self.engine) as session:
            return int(session.exec(select(func.count()).where(Episode.evaluation == evaluation_id)).one())
