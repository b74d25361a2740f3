"""Evaluations: run a policy (a model or a baseline) over an environment's episodes, follow it, read its
episodes, export them, cancel it."""

import asyncio

from fastapi import APIRouter, Request, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from app.api.deps import (
    AccessDep,
    AgentsDep,
    CallerDep,
    ClientDep,
    EndpointsDep,
    EvaluationsDep,
    EvaluatorDep,
    RunnerDep,
    SettingsDep,
)
from app.urls import own_gateway
from app.usecases.evaluations import EvaluationRequest, run_shown, visible_episode, visible_run
from core.errors import ConflictError, ForbiddenError
from evals.models import UNDER_WAY, EpisodeBase, EpisodePublic, EvaluationBase, EvaluationPublic
from evals.rollouts import push_rollouts, rollouts_jsonl
from evals.steps import streamed

router = APIRouter(prefix="/api/evaluations", tags=["evaluations"])


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_evaluation(
    body: EvaluationRequest, request: Request, evaluator: EvaluatorDep, caller: CallerDep, client: ClientDep
) -> EvaluationBase:
    """Start a run; it is `queued` until its endpoint answers, then `running`, then `finished`."""
    row = await evaluator.start(body, caller, client, lambda endpoint_id: own_gateway(request, endpoint_id))
    return EvaluationBase.model_validate(row.model_dump())


@router.get("")
def list_evaluations(
    evaluations: EvaluationsDep, access: AccessDep, caller: CallerDep, environment: str | None = None
) -> list[EvaluationBase]:
    """The newest runs (a private endpoint's: for its owner and the admin only)."""
    return evaluations.list_runs(run_shown(access, caller), environment=environment)


@router.get("/{evaluation_id}")
def read_evaluation(
    evaluation_id: str, evaluations: EvaluationsDep, access: AccessDep, caller: CallerDep
) -> EvaluationPublic:
    """The run, its summary and its episodes (without their steps: see /episodes.jsonl)."""
    visible_run(evaluations, access, caller, evaluation_id)
    return evaluations.public(evaluation_id)


@router.get("/{evaluation_id}/episodes.jsonl")
def export_episodes(
    evaluation_id: str, evaluations: EvaluationsDep, access: AccessDep, caller: CallerDep
) -> StreamingResponse:
    """Every finished episode, one JSON object per line, each with the run's metadata."""
    visible_run(evaluations, access, caller, evaluation_id)
    return StreamingResponse(
        rollouts_jsonl(evaluations, evaluation_id),
        media_type="application/x-ndjson",
        headers={"content-disposition": f'attachment; filename="{evaluation_id}-episodes.jsonl"'},
    )


class PushRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    repo: str = Field(description="the dataset repo to create or update, e.g. alice/wordle-rollouts")
    private: bool = False


@router.post("/{evaluation_id}/push")
async def push_to_hub(
    evaluation_id: str,
    body: PushRequest,
    evaluations: EvaluationsDep,
    settings: SettingsDep,
    access: AccessDep,
    caller: CallerDep,
) -> dict[str, str]:
    """Push the rollouts to a dataset repo on the Hub with your own token: the JSONL and a dataset card."""
    await asyncio.to_thread(visible_run, evaluations, access, caller, evaluation_id)
    url = await asyncio.to_thread(
        push_rollouts,
        evaluations,
        evaluation_id,
        body.repo,
        token=caller.token,
        endpoint=settings.hf_endpoint,
        private=body.private,
    )
    return {"url": url, "repo": body.repo}


@router.get("/episodes/{episode_id}", response_model=EpisodePublic)
def read_episode(
    episode_id: str, evaluations: EvaluationsDep, agents: AgentsDep, endpoints: EndpointsDep, caller: CallerDep
) -> StreamingResponse:
    """One episode with every step, written a step at a time: what the share link `/?episode=ID` opens (a private
    endpoint's: for its owner and the admin only)."""
    episode = visible_episode(evaluations, agents, endpoints, caller, episode_id)
    head = EpisodeBase.model_validate(episode.model_dump()).model_dump(mode="json")
    return StreamingResponse(streamed(head, evaluations.steps.records(episode)), media_type="application/json")


@router.delete("/{evaluation_id}")
async def cancel_evaluation(
    evaluation_id: str, evaluations: EvaluationsDep, runner: RunnerDep, access: AccessDep, caller: CallerDep
) -> EvaluationBase:
    """Cancel a run: its owner or the admin may (one nobody owns: anyone while sign-in is off); the episodes
    that finished are kept."""
    run = await asyncio.to_thread(visible_run, evaluations, access, caller, evaluation_id)
    if not access.may_manage(caller, run.owner):
        who = f"by {run.owner}" if run.owner else "by nobody signed in"
        raise ForbiddenError(f"evaluation {evaluation_id} was started {who}; only they or an admin can cancel it")
    if run.status in UNDER_WAY and not await runner.cancel(evaluation_id):
        raise ConflictError(
            f"evaluation {evaluation_id} runs in another envhub process ({run.instance}); cancel it there"
        )
    return EvaluationBase.model_validate(evaluations.get(evaluation_id).model_dump())
