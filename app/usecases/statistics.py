"""A statistical report, run in the background: each reference player plays the endpoint as an evaluation (so that
its episodes are stored and replay in the episode viewer), one after another, then the checks read the lane, and the
report is filed in `checkreport` (suite statistical) with each task's difficulty.

Players: `random` and `first-legal` once per task, the adversarial panel once per task, and each model preset (the
caller's, then the admin's reference preset) k times per task at the lane's temperature. The tasks are the first
`episodes` of a Task API split, or seeds 0..N-1 when the environment has none."""

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, col, select

from app.settings import Settings
from app.usecases.evaluations import EvaluationRequest, Evaluator, ModelChoice
from app.usecases.validation import Validations
from catalog.models import EnvironmentDetail
from catalog.store import load_environment
from conformance.checker import Checker
from conformance.engine import run_checks
from conformance.models import CheckReport, CheckReportPublic, public
from conformance.report import Report, RunStatus, Suite
from conformance.statistical.adversarial import PANEL, ReplayPolicy
from conformance.statistical.checks import CHECKS
from conformance.statistical.figures import mean_se, wilson
from conformance.statistical.gate import GATE
from conformance.statistical.lane import Lane, LaneError, Played, Replayed, declared_of, per_task
from conformance.statistical.models import TaskDifficulty
from conformance.statistical.oracle import OracleRun, play_oracle, unplayable
from conformance.statistical.report import PlayerFigures, StatisticalRun
from core.callers import Caller
from core.clock import utcnow
from core.errors import ConflictError, EnvhubError, NotFoundError
from core.outbound import live_session
from envclient.interface import read_interface
from evals.models import EpisodeBase, EvaluationStatus
from evals.presets import LOCAL_OWNER, preset_owner
from hosting.models import EndpointStatus
from protocol.observations import reward_number
from rollout.players import Policy

__all__ = ["Statistics", "StatisticsRequest"]

log = logging.getLogger(__name__)

INTERRUPTED = "interrupted"  # the code of a report whose envhub stopped while it ran
STOPPED = "the report stopped before its players finished: envhub stopped, or the board stage running it timed out"


class StatisticsRequest(BaseModel):
    """Which endpoint the reference players play, with which models, on which tasks."""

    model_config = ConfigDict(extra="forbid")

    endpoint: str = Field(max_length=64, description="a running endpoint")
    presets: list[str] = Field(default_factory=list, max_length=4, description="the caller's model presets to play")
    split: str | None = Field(default=None, max_length=100, description="a Task API split; else its first, or seeds")


@dataclass
class _Running:
    body: StatisticsRequest
    caller: Caller
    url: str
    environment: str
    report: Report
    models: list[tuple[str, ModelChoice]]
    report_id: int
    tasks: dict[str, Any] = field(default_factory=dict)  # the request's fields that choose the tasks


class Statistics:
    """Starts statistical reports, files them, and keeps what they measured per task."""

    def __init__(self, settings: Settings, evaluator: Evaluator, checker: Checker, validations: Validations) -> None:
        self.settings = settings
        self.evaluator = evaluator
        self.checker = checker  # files the reports, as every lane's
        self.validations = validations  # the environment's folder and the Docker engine its oracle plays on
        self.engine = evaluator.engine
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._born = utcnow()  # this instance's reports from before are a previous process's

    async def start(self, body: StatisticsRequest, caller: Caller, gateway: Callable[[str], str]) -> CheckReportPublic:
        """Check who asks and what they name, file the report running, and run it in the background."""
        manager = self.evaluator.endpoints
        manager.access.ensure_may_launch(caller)
        endpoint = await asyncio.to_thread(manager.get, body.endpoint)
        if not manager.access.may_use(caller, endpoint.owner, private=endpoint.private):
            raise NotFoundError(f"no endpoint {body.endpoint!r}; list them with GET /api/endpoints")
        if endpoint.status != EndpointStatus.RUNNING:
            raise ConflictError(f"endpoint {endpoint.id} is {endpoint.status.value}; start it first")
        models = await asyncio.to_thread(self._models, body, caller)
        environment = await asyncio.to_thread(load_environment, self.engine, endpoint.environment)
        url = gateway(endpoint.id)
        s = self.settings
        report = Report(
            suite=Suite.STATISTICAL,
            target=url,
            environment=environment.id,
            revision=endpoint.revision,
            checked_at=utcnow(),
            duration_s=0,
            results=(),
            status=RunStatus.RUNNING,
            statistics=StatisticalRun(
                policy_version=GATE.version,
                gate=GATE.described(),
                settings={
                    "episodes": s.statistical_episodes,
                    "k": s.statistical_k,
                    "group_size": s.statistical_group_size,
                    "temperature": s.statistical_temperature,
                    "presets": [name for name, _ in models],
                    "replays": s.statistical_replays,
                    "max_steps": s.statistical_max_steps,
                },
                instance=self.evaluator.store.instance,
            ),
        )
        filed = await asyncio.to_thread(self.checker.file, report, endpoint=endpoint.id)
        running = _Running(body, caller, url, environment.id, report, models, filed.id)
        task = asyncio.create_task(self._run(filed.id, running), name=f"statistical report {filed.id}")
        self._tasks[filed.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(filed.id, None))
        return filed

    def _models(self, body: StatisticsRequest, caller: Caller) -> list[tuple[str, ModelChoice]]:
        """The caller's presets, then the admin's reference preset, each at the lane's temperature."""
        presets = self.evaluator.presets
        owner = preset_owner(caller, self.evaluator.endpoints.access) if body.presets else LOCAL_OWNER
        named = [(owner, name) for name in body.presets]
        reference = self.settings.statistical_reference_preset
        if reference and (LOCAL_OWNER, reference) not in named:
            named.append((LOCAL_OWNER, reference))
        temperature = self.settings.statistical_temperature
        return [
            (
                name,
                ModelChoice(
                    model=presets.config_of(presets.get(who, name)).model_copy(update={"temperature": temperature})
                ),
            )
            for who, name in named
        ]

    async def ended(self, report_id: int, *, owned: bool = False) -> None:
        """Wait until a report under way here ends. `owned`: the waiter owns the report, which is stopped (failed,
        interrupted) when the waiter is cancelled, as a board stage out of time is."""
        task = self._tasks.get(report_id)
        if task is None:
            return
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            if owned:
                task.cancel()
                await asyncio.wait([task])
            raise

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, report_id: int, running: _Running) -> None:
        began = time.monotonic()
        report = running.report
        try:
            lane = await self._lane(running)
            results = await run_checks(lane, CHECKS)
            assert report.statistics is not None
            statistics = report.statistics.model_copy(
                update={
                    "players": tuple(_figures(p) for p in lane.played) + _oracle_figures(lane.oracle),
                    "settings": report.statistics.settings | running.tasks,
                }
            )
            report = report.model_copy(
                update={"status": RunStatus.FINISHED, "results": tuple(results), "statistics": statistics}
            )
            await asyncio.to_thread(self._keep_difficulty, report_id, running, lane)
        except asyncio.CancelledError:
            report = _failed(report, INTERRUPTED, STOPPED)
            raise
        except LaneError as exc:
            report = _failed(report, "player_failed", str(exc))
        except EnvhubError as exc:  # a player envhub would not start: a model refused, a preset gone
            report = _failed(report, exc.code, exc.message)
        except Exception as exc:
            log.exception("statistical report %s failed", report_id)
            report = _failed(report, "internal_error", f"{type(exc).__name__}: {exc}")
        finally:
            report = report.model_copy(update={"duration_s": round(time.monotonic() - began, 3)})
            filing = asyncio.to_thread(self.checker.file, report, endpoint=running.body.endpoint, report_id=report_id)
            await asyncio.shield(filing)

    async def _lane(self, running: _Running) -> Lane:
        s = self.settings
        body = running.body
        environment = await asyncio.to_thread(load_environment, self.engine, running.environment)
        outbound = live_session(
            self.evaluator.guard, running.url, credentials={running.url: self.evaluator.tokens.header(body.endpoint)}
        )
        try:
            interface = await read_interface(running.url, outbound)
        finally:
            await outbound.aclose()
        split = body.split or next((x.name for x in interface.splits), None)
        count = next((x.count for x in interface.splits if x.name == split), None)
        tasks = min(s.statistical_episodes, count) if count else s.statistical_episodes
        running.tasks = {"split": split, "tasks": tasks}

        def chosen(times: int) -> dict[str, Any]:
            repeated = [n for n in range(tasks) for _ in range(times)]
            return {"split": split, "indices": repeated} if split else {"seeds": repeated}

        played = [
            await self._play(running, name, "baseline", chosen(1), policy=name) for name in ("random", "first-legal")
        ]
        for member in PANEL:
            played.append(await self._play(running, member.label, "adversarial", chosen(1), chosen=member))
        for name, model in running.models:
            played.append(await self._play(running, f"model:{name}", "model", chosen(s.statistical_k), policy=model))

        async def replay(original: EpisodeBase) -> Replayed:
            return await self._replay(running, original)

        declared = declared_of(environment.manifest)
        oracle = await self._oracle(running, environment, declared.oracle, tasks) if declared.oracle else None
        return Lane(
            declared,
            tuple(played),
            GATE,
            s.statistical_k,
            s.statistical_group_size,
            s.statistical_replays,
            replay,
            oracle,
        )

    async def _oracle(
        self, running: _Running, environment: EnvironmentDetail, oracle: dict[str, Any], tasks: int
    ) -> OracleRun:
        """The declared oracle played in the environment's image, once per seed 0..tasks-1 (a script oracle takes a
        seed, not a split's task), when envhub has the folder at the report's revision and a Docker engine."""
        validations = self.validations
        folder = await asyncio.to_thread(validations.folder_at_hand, environment, running.report.revision)
        provider = await asyncio.to_thread(validations.provider) if folder is not None else None
        refused = unplayable(oracle, folder, provider)
        if refused is not None:
            return refused
        assert folder is not None and provider is not None  # unplayable refuses without either
        validation = (environment.manifest or {}).get("validation") or {}
        startup = self.settings.launch_timeout_s  # the subject is a server answering /health, as a launch's is
        return await asyncio.to_thread(play_oracle, provider, folder, validation, range(tasks), startup)

    async def _play(
        self,
        running: _Running,
        label: str,
        kind: str,
        tasks: dict[str, Any],
        *,
        policy: Any = "random",
        chosen: Policy | None = None,
    ) -> Played:
        s = self.settings
        request = EvaluationRequest(
            endpoint=running.body.endpoint,
            policy=policy,
            concurrency=s.statistical_concurrency,
            max_steps=s.statistical_max_steps,
            retries=2,
            **tasks,
        )
        row = await self.evaluator.start(
            request, running.caller, None, lambda _: running.url, chosen, statistical_report=running.report_id
        )
        await self.evaluator.runner.ended(row.id)
        store = self.evaluator.store
        run = await asyncio.to_thread(store.get, row.id)
        if run.status != EvaluationStatus.FINISHED:
            raise LaneError(f"{label} did not play: evaluation {run.id} {run.status.value}: {run.message}")
        episodes = await asyncio.to_thread(store.episodes, row.id)
        return Played(label, kind, run.id, tuple(EpisodeBase.model_validate(e.model_dump()) for e in episodes))

    async def _replay(self, running: _Running, original: EpisodeBase) -> Replayed:
        store = self.evaluator.store

        def step_records() -> list[dict[str, Any]]:
            episode = store.episode(original.id)
            return [r for r in store.steps.records(episode) if r.get("kind") == "step"]

        def rewards(records: list[dict[str, Any]]) -> list[float | None]:
            return [reward_number(r.get("reward")) for r in records]

        records = await asyncio.to_thread(step_records)
        task = original.task or {}
        tasks = (
            {"split": task["split"], "indices": [task["index"]]} if "split" in task else {"seeds": [original.seed or 0]}
        )
        policy = ReplayPolicy(original.id, tuple(r["action"] for r in records if isinstance(r.get("action"), dict)))
        again = await self._play(running, policy.label, "replay", tasks, chosen=policy)
        records_again: list[dict[str, Any]] = []
        if again.episodes:
            first = again.episodes[0]
            records_again = await asyncio.to_thread(
                lambda: [r for r in store.steps.records(store.episode(first.id)) if r.get("kind") == "step"]
            )
        return Replayed(original, again, rewards(records), rewards(records_again))

    def filed(self, report_id: int) -> CheckReportPublic:
        """A statistical report as filed; NotFoundError for an id that is none."""
        with Session(self.engine) as session:
            row = session.get(CheckReport, report_id)
            filed = public(row) if row is not None and row.suite == Suite.STATISTICAL else None
        if not isinstance(filed, CheckReportPublic):
            raise NotFoundError(f"no statistical report {report_id}; list them with GET /api/checks?suite=statistical")
        return filed

    def fail_orphans(self, live_instances: set[str]) -> int:
        """Mark failed the reports left running by envhub processes that are gone (or by this one, when it does not
        run them, having started after them): their players stopped with the process, and nothing would finish them."""
        here = self.evaluator.store.instance
        with Session(self.engine) as session:
            statement = (
                select(CheckReport)
                .where(col(CheckReport.suite) == Suite.STATISTICAL.value)
                .where(col(CheckReport.verdict).is_(None))
            )
            rows = list(session.execute(statement).scalars())
        orphans = []
        for row in rows:
            report = Report.model_validate(row.report)
            instance = report.statistics.instance if report.statistics is not None else ""
            earlier = instance == here and report.checked_at < self._born
            if report.status == RunStatus.RUNNING and (earlier or instance not in live_instances):
                failed = _failed(report, INTERRUPTED, STOPPED + "; start a new report")
                orphans.append(self.checker.file(failed, endpoint=row.endpoint, report_id=row.id))
        return len(orphans)

    def _keep_difficulty(self, report_id: int, running: _Running, lane: Lane) -> None:
        """Each task's figures, for the first model played, else the best honest player."""
        models = lane.of_kind("model")
        honest = [p for p in lane.honest if p.episodes]
        player = models[0] if models else max(honest, key=lambda p: p.mean_se()[0] or 0.0, default=None)
        if player is None:
            return
        with Session(self.engine) as session:
            for t in per_task(player, lane.k, lane.group):
                session.add(
                    TaskDifficulty(
                        report=report_id,
                        task=t.task,
                        environment=running.environment,
                        revision=running.report.revision,
                        player=player.label,
                        evaluation=player.evaluation,
                        reset=t.reset,
                        samples=t.n,
                        passes=t.passes,
                        pass_at_k=t.pass_at_k,
                        k=lane.k,
                        mean_reward=t.mean_reward,
                        se=t.se,
                        p_signal=t.p_signal,
                        p_signal_low=t.p_signal_interval[0],
                        p_signal_high=t.p_signal_interval[1],
                        group_size=lane.group,
                    )
                )
            session.commit()


def _failed(report: Report, code: str, message: str) -> Report:
    return report.model_copy(update={"status": RunStatus.FAILED, "code": code, "message": message})


def _oracle_figures(oracle: OracleRun | None) -> tuple[PlayerFigures, ...]:
    """The oracle's row among the players when it played: it plays in the image, so no evaluation holds it."""
    if oracle is None or not oracle.rewards:
        return ()
    mean, se = mean_se(list(oracle.rewards))
    n, passes = len(oracle.rewards), sum(r > 0 for r in oracle.rewards)
    return (
        PlayerFigures(
            label="oracle",
            kind="oracle",
            evaluation="",
            episodes=n,
            mean_reward=mean,
            se=se,
            pass_rate=passes / n,
            pass_interval=wilson(passes, n),
            errors=0,
        ),
    )


def _figures(played: Played) -> PlayerFigures:
    mean, se = played.mean_se()
    n = len(played.episodes)
    return PlayerFigures(
        label=played.label,
        kind=played.kind,
        evaluation=played.evaluation,
        episodes=n,
        mean_reward=mean,
        se=se,
        pass_rate=played.passes / n if n else None,
        pass_interval=wilson(played.passes, n),
        errors=sum(e.status == "failed" for e in played.episodes),
    )
