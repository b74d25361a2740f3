"""Evaluation runs under way: a policy plays a run's episodes through the harness, K at a time; each episode's steps
are stored as they are played, within the run's storage budget, and the episode as it finishes, with the run's
summary, so a crash loses at most the episodes in flight.

The caller (the API or the CLI) resolves where the run plays (a URL and the outbound session to
reach it) and what to do afterwards (stop an endpoint it launched); the runner only plays, and
writes through the store (evals/store.py).
"""

import asyncio
import logging
import secrets
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from core.clock import utcnow
from core.errors import TooManyRequestsError
from core.outbound import OutboundSession
from evals.models import Evaluation, EvaluationStatus
from evals.steps import Budget
from evals.store import INTERRUPTED, EvaluationStore, episode_id
from rollout.episodes import EpisodeResult, EpisodeSpec, Limits, play_episode
from rollout.harness import Brief
from rollout.players import Policy

__all__ = ["EpisodePlayer", "Keep", "Play", "PrepareError", "Runner", "new_evaluation_id"]

log = logging.getLogger(__name__)

Progress = Callable[[Evaluation, EpisodeResult], None]
Keep = Callable[[dict[str, Any]], Awaitable[None]]  # stores one of an episode's records as it is played
# Plays an episode whole its own way (a harness CLI run headless) instead of step by step with the policy.
EpisodePlayer = Callable[[EpisodeSpec, Keep], Awaitable[EpisodeResult]]


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
    player: EpisodePlayer | None = None  # plays each episode instead of play_episode with the policy


class PrepareError(Exception):
    """A run could not start: its endpoint did not start, or its environment did not answer; the code says which."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class Runner:
    """The runs under way in this envhub process; their rows are the store's. Each run may store `budget_bytes` of
    its episodes' steps with their observations whole (ENVHUB_EVALUATION_BUDGET_BYTES)."""

    def __init__(self, store: EvaluationStore, budget_bytes: int) -> None:
        self.store = store
        self.budget_bytes = budget_bytes
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopping = False
        self._starting: Counter[str | None] = Counter()  # runs being started, by owner, not yet on record

    @property
    def under_way(self) -> frozenset[str]:
        """The ids of the runs this process runs now."""
        return frozenset(self._tasks)

    @asynccontextmanager
    async def slot(self, owner: str | None, most: int | None) -> AsyncIterator[None]:
        """Hold one of the owner's `most` runs at once while a run is started (None: no cap), until it is on record
        or given up; TooManyRequestsError when the owner has them all."""
        if most is not None:
            under_way = await asyncio.to_thread(self.store.list_under_way, owner)
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

    def start(
        self, evaluation: Evaluation, prepare: Callable[[], Awaitable[Play]], progress: Progress | None = None
    ) -> asyncio.Task[None]:
        """Run in the background: `prepare` readies what it plays with (it may launch an endpoint and wait
        for it); a PrepareError from it fails the run with its message and code."""
        task = asyncio.create_task(self._run(evaluation, prepare, progress), name=f"evaluation {evaluation.id}")
        self._tasks[evaluation.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(evaluation.id, None))
        return task

    async def _run(
        self, evaluation: Evaluation, prepare: Callable[[], Awaitable[Play]], progress: Progress | None
    ) -> None:
        try:
            play = await prepare()
        except asyncio.CancelledError:
            await self._ended(evaluation.id, EvaluationStatus.CANCELLED, "cancelled before it started")
            raise
        except PrepareError as exc:
            await self._ended(evaluation.id, EvaluationStatus.FAILED, str(exc), exc.code)
            return
        loop = asyncio.get_running_loop()
        started = loop.time()
        slots = asyncio.Semaphore(play.concurrency)
        budget = Budget(self.budget_bytes)
        unfinished: set[str] = set()  # episodes begun and not yet recorded: a cancel leaves no steps of theirs behind

        async def one(spec: EpisodeSpec) -> None:
            named = episode_id(evaluation.id, spec.index)

            async def keep(record: dict[str, Any]) -> None:
                await asyncio.to_thread(self.store.steps.write, named, record, budget)

            async with slots:
                unfinished.add(named)
                if play.player is not None:
                    result = await play.player(spec, keep)
                else:
                    result = await play_episode(
                        play.url,
                        play.outbound,
                        play.policy,
                        play.brief,
                        spec,
                        play.limits,
                        keep=keep,
                        player_name=f"envhub evaluation {evaluation.id}",
                    )
            evaluation.summary = await asyncio.to_thread(self.store.record, evaluation, result, loop.time() - started)
            unfinished.discard(named)
            if progress is not None:
                progress(evaluation, result)

        status, message, code = EvaluationStatus.FINISHED, "", ""
        try:
            await self._write(evaluation.id, status=EvaluationStatus.RUNNING, started_at=utcnow(), message="")
            await asyncio.gather(*(one(spec) for spec in play.specs))
        except asyncio.CancelledError:
            status, message = EvaluationStatus.CANCELLED, "cancelled; the episodes that finished are kept"
            if self._stopping:
                status, message = EvaluationStatus.INTERRUPTED, INTERRUPTED
            raise
        except Exception as exc:
            log.exception("evaluation %s failed", evaluation.id)
            status, code = EvaluationStatus.FAILED, "run_failed"
            message = f"the run failed: {type(exc).__name__}: {exc}"
        finally:
            await self._ended(evaluation.id, status, message, code)
            if unfinished:
                await asyncio.shield(asyncio.to_thread(self.store.steps.drop, unfinished))
            await asyncio.shield(self._close(play))

    async def _ended(self, evaluation_id: str, status: EvaluationStatus, message: str, code: str = "") -> None:
        """On record, off the event loop, whether or not the run was cancelled (`code`: why it failed, if it did)."""
        await self._write(evaluation_id, status=status, message=message, code=code, finished_at=utcnow())

    async def _write(self, evaluation_id: str, **fields: Any) -> None:
        """Update the run's row off the event loop. A cancel does not cut the write short: it waits until the
        write has landed, so that no later write (a cancel's end) lands before it."""
        write = asyncio.ensure_future(asyncio.to_thread(self.store.update, evaluation_id, **fields))
        try:
            await asyncio.shield(write)
        except asyncio.CancelledError:
            await write
            raise

    async def _close(self, play: Play) -> None:
        try:
            await play.policy.aclose()
            await play.outbound.aclose()
            if play.after is not None:
                await play.after()
        except Exception:
            log.exception("cleaning up after an evaluation failed")

    async def ended(self, evaluation_id: str) -> None:
        """Wait until a run under way here ends (at once when it does not run here)."""
        task = self._tasks.get(evaluation_id)
        if task is not None:
            await asyncio.wait([task])

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
