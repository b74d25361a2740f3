"""Agent runs as training data: a run's (or several runs') SFT and RL rows as JSONL, and pushed to a Hub dataset. A
run is its owner's and the admin's only: to anyone else it does not exist."""

import asyncio
from collections.abc import Iterator

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from app.api.deps import AccessDep, AgentRunsDep, CallerDep, SettingsDep
from core.errors import NotFoundError
from evals.agent_exports import ensure_token_ids, push_runs, rl_jsonl, sft_jsonl
from evals.models import AgentRun

router = APIRouter(prefix="/api/agent-runs", tags=["agent runs"])

SKIPPED_HEADER = "x-envhub-runs-skipped"  # runs of the selection that recorded no token ids, so gave no RL rows


def _jsonl(lines: Iterator[str], name: str, headers: dict[str, str] | None = None) -> StreamingResponse:
    disposition = {"content-disposition": f'attachment; filename="{name}"'}
    return StreamingResponse(lines, media_type="application/x-ndjson", headers=disposition | (headers or {}))


def _selected(
    store: AgentRunsDep,
    access: AccessDep,
    caller: CallerDep,
    endpoint: str | None,
    harness: str | None,
    model: str | None,
) -> list[AgentRun]:
    return store.list_visible(access, caller, endpoint=endpoint, harness=harness, model=model)


@router.get("/sft.jsonl")
def export_sft_of_runs(
    store: AgentRunsDep,
    access: AccessDep,
    caller: CallerDep,
    endpoint: str | None = None,
    harness: str | None = None,
    model: str | None = None,
) -> StreamingResponse:
    """The SFT rows of every run you may see (yours; the admin: all), of an endpoint, a harness, a model if named."""
    runs = _selected(store, access, caller, endpoint, harness, model)
    return _jsonl(sft_jsonl(store, runs), "agent-runs-sft.jsonl")


@router.get("/rl.jsonl")
def export_rl_of_runs(
    store: AgentRunsDep,
    access: AccessDep,
    caller: CallerDep,
    endpoint: str | None = None,
    harness: str | None = None,
    model: str | None = None,
) -> StreamingResponse:
    """The RL rows of the runs selected as for /sft.jsonl; the header X-Envhub-Runs-Skipped counts those that
    recorded no token ids."""
    runs = _selected(store, access, caller, endpoint, harness, model)
    with_ids = store.with_token_ids(r.id for r in runs)
    kept = [r for r in runs if r.id in with_ids]
    return _jsonl(rl_jsonl(store, kept), "agent-runs-rl.jsonl", {SKIPPED_HEADER: str(len(runs) - len(kept))})


@router.get("/{run_id}/sft.jsonl")
def export_sft(run_id: str, store: AgentRunsDep, access: AccessDep, caller: CallerDep) -> StreamingResponse:
    """The run's SFT rows: one per conversation chain, its `messages` and `tools` as TRL's SFTTrainer reads them."""
    run = store.visible(access, caller, run_id)
    return _jsonl(sft_jsonl(store, [run]), f"{run.id}-sft.jsonl")


@router.get("/{run_id}/rl.jsonl")
def export_rl(run_id: str, store: AgentRunsDep, access: AccessDep, caller: CallerDep) -> StreamingResponse:
    """The run's RL rows (token ids, log-probs, the mask over the model's own tokens); 409 no_token_ids when its
    model server returned none."""
    run = store.visible(access, caller, run_id)
    ensure_token_ids(store, run)
    return _jsonl(rl_jsonl(store, [run]), f"{run.id}-rl.jsonl")


class PushRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    repo: str = Field(description="the dataset repo to create or update, e.g. alice/wordle-agent-runs")
    private: bool = False


async def _push(
    runs: list[AgentRun], body: PushRequest, store: AgentRunsDep, settings: SettingsDep, token: str | None
) -> dict[str, str]:
    url = await asyncio.to_thread(
        push_runs, store, runs, body.repo, token=token, endpoint=settings.hf_endpoint, private=body.private
    )
    return {"url": url, "repo": body.repo}


@router.post("/push")
async def push_runs_to_hub(
    body: PushRequest,
    store: AgentRunsDep,
    settings: SettingsDep,
    access: AccessDep,
    caller: CallerDep,
    endpoint: str | None = None,
    harness: str | None = None,
    model: str | None = None,
) -> dict[str, str]:
    """Push the selected runs' SFT rows (and RL rows, where token ids were recorded) to a Hub dataset with your own
    token, with a dataset card."""
    runs = await asyncio.to_thread(_selected, store, access, caller, endpoint, harness, model)
    if not runs:
        raise NotFoundError("no agent run of yours matches: nothing to push", code="agent_run_not_found")
    return await _push(runs, body, store, settings, caller.token)


@router.post("/{run_id}/push")
async def push_run_to_hub(
    run_id: str, body: PushRequest, store: AgentRunsDep, settings: SettingsDep, access: AccessDep, caller: CallerDep
) -> dict[str, str]:
    """Push the run's SFT rows (and RL rows, if it recorded token ids) to a Hub dataset with your own token."""
    run = await asyncio.to_thread(store.visible, access, caller, run_id)
    return await _push([run], body, store, settings, caller.token)
