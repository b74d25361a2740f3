"""Statistical reports (does it teach?): start one on an endpoint, read it, its tasks' difficulty, the tasks that
teach its model, and an evaluation's result in RFC 013's fields."""

import asyncio
from typing import Any

from fastapi import APIRouter, Request, status
from sqlmodel import Session, col, select

from app.api.deps import AccessDep, CallerDep, EngineDep, EvaluationsDep, SettingsDep, StatisticsDep
from app.api.evaluations import PushRequest
from app.urls import own_gateway
from app.usecases.evaluations import visible_run
from app.usecases.statistics import StatisticsRequest
from conformance.models import CheckReport, CheckReportPublic
from conformance.report import Report, Suite
from conformance.statistical.exports import evaluation_result, task_split, teaching
from conformance.statistical.lane import Played, task_key
from conformance.statistical.models import TaskDifficulty
from conformance.statistical.push import push_teaching
from evals.models import EpisodeBase

router = APIRouter(tags=["statistics"])


@router.post("/api/statistics", status_code=status.HTTP_202_ACCEPTED)
async def create_statistics(
    body: StatisticsRequest, request: Request, statistics: StatisticsDep, caller: CallerDep
) -> CheckReportPublic:
    """Start a statistical report on a running endpoint: filed `running` now, `finished` (or `failed`) when its
    players have played; follow it with GET /api/statistics/{id}."""
    return await statistics.start(body, caller, lambda endpoint_id: own_gateway(request, endpoint_id))


def _difficulty(engine: Any, report_id: int) -> list[TaskDifficulty]:
    with Session(engine) as session:
        statement = select(TaskDifficulty).where(col(TaskDifficulty.report) == report_id)
        return list(session.execute(statement).scalars())


@router.get("/api/statistics/{report_id}")
async def read_statistics(statistics: StatisticsDep, report_id: int) -> CheckReportPublic:
    return await asyncio.to_thread(statistics.filed, report_id)


@router.get("/api/statistics/{report_id}/tasks")
def read_task_split(engine: EngineDep, statistics: StatisticsDep, report_id: int) -> dict[str, Any]:
    """The split the report played, each task with its RFC 013 `difficulty` for the report's model."""
    run = statistics.filed(report_id).report.statistics
    settings = run.settings if run is not None else {}
    return {"report": report_id, "settings": settings, "tasks": task_split(_difficulty(engine, report_id))}


@router.get("/api/statistics/{report_id}/teaching")
def read_teaching(engine: EngineDep, statistics: StatisticsDep, report_id: int) -> dict[str, Any]:
    """The tasks that teach the report's model (0 < p < 1), the most signal first, with the reset options that
    start each on the endpoint."""
    statistics.filed(report_id)
    rows = teaching(_difficulty(engine, report_id))
    return {
        "report": report_id,
        "player": rows[0].player if rows else None,
        "tasks": task_split(rows),
        "resets": [row.reset for row in rows],
    }


@router.post("/api/statistics/{report_id}/teaching/push")
async def push_teaching_to_hub(
    report_id: int,
    body: PushRequest,
    engine: EngineDep,
    statistics: StatisticsDep,
    settings: SettingsDep,
    caller: CallerDep,
) -> dict[str, str]:
    """Push the tasks that teach the report's model to a dataset repo on the Hub with your own token: one task a line,
    most signal first, with the reset options that start it, and a dataset card."""
    filed = await asyncio.to_thread(statistics.filed, report_id)
    rows = teaching(await asyncio.to_thread(_difficulty, engine, report_id))
    url = await asyncio.to_thread(
        push_teaching,
        report_id,
        filed.report,
        rows,
        body.repo,
        token=caller.token,
        endpoint=settings.hf_endpoint,
        private=body.private,
    )
    return {"url": url, "repo": body.repo}


@router.get("/api/evaluations/{evaluation_id}/result")
async def read_result(
    evaluation_id: str, engine: EngineDep, store: EvaluationsDep, access: AccessDep, caller: CallerDep
) -> dict[str, Any]:
    """An evaluation's result in RFC 013's fields; `by_difficulty` and `reproducible` come from the newest
    statistical report of its environment revision, when there is one."""
    run = await asyncio.to_thread(visible_run, store, access, caller, evaluation_id)
    episodes = await asyncio.to_thread(store.episodes, run.id)
    played = Played(
        run.policy_label, "evaluated", run.id, tuple(EpisodeBase.model_validate(e.model_dump()) for e in episodes)
    )

    def newest() -> tuple[dict[str, TaskDifficulty], bool | None]:
        with Session(engine) as session:
            statement = (
                select(CheckReport)
                .where(col(CheckReport.suite) == Suite.STATISTICAL.value)
                .where(col(CheckReport.environment) == run.environment)
                .where(col(CheckReport.revision) == run.revision)
                .where(col(CheckReport.verdict).is_not(None))
                .order_by(col(CheckReport.id).desc())
            )
            row = session.execute(statement.limit(1)).scalars().first()
        if row is None:
            return {}, None
        report = Report.model_validate(row.report)
        variance = next((r for r in report.results if r.check_id == "statistical.variance_bound"), None)
        reproducible = None if variance is None or variance.status == "skip" else variance.status == "pass"
        return {d.task: d for d in _difficulty(engine, row.id or 0)}, reproducible

    difficulty, reproducible = await asyncio.to_thread(newest)
    k = max(1, len(played.episodes) // max(1, len({task_key(e) for e in played.episodes})))
    return evaluation_result(played, k, difficulty, reproducible)
