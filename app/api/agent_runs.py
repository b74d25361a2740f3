"""Agent runs: a harness x model preset x endpoint x task, started here with a credential the harness sends as its
model API key (to the model door) and as X-Envhub-Run (to the endpoint's MCP door); read with its model calls; ended.
A run is its owner's (whose presets it names) and the admin's: anyone else is told there is no such run."""

import asyncio
from typing import Any

from fastapi import APIRouter, Request, status
from pydantic import BaseModel, ConfigDict, Field

from app.api.deps import AccessDep, AgentRunsDep, CallerDep, EndpointsDep, PresetsDep, RunEndsDep, SettingsDep
from app.urls import connection_base, endpoint_url
from core.errors import NotFoundError
from evals.models import AgentRun, AgentRunBase, AgentRunStatus, ModelCallBase
from evals.presets import preset_owner

router = APIRouter(prefix="/api/agent-runs", tags=["agent runs"])

HARNESSES = ("claude-code", "codex", "opencode", "qwen-code", "own")
LISTED = 100


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_calls: int | None = Field(default=None, gt=0, description="at most the server's ENVHUB_AGENT_RUN_MAX_CALLS")
    max_output_tokens: int | None = Field(default=None, gt=0)
    wall_s: float | None = Field(default=None, gt=0)


class AgentRunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    endpoint: str = Field(description="a running endpoint, whose MCP door the harness plays through")
    preset: str = Field(description="your model preset the model door forwards the harness's calls to")
    harness: str = Field(default="own", pattern="^(" + "|".join(HARNESSES) + ")$")
    task: dict[str, Any] | None = None
    limits: Limits = Field(default_factory=Limits)


class AgentRunStarted(BaseModel):
    run: AgentRunBase
    credential: str = Field(description="given this once: the model API key and the X-Envhub-Run header")
    model_url: str = Field(description="an OpenAI client's base URL")
    anthropic_base_url: str = Field(description="an Anthropic client's base URL (ANTHROPIC_BASE_URL)")
    mcp_url: str
    headers: dict[str, str] = Field(description="to send to the MCP door")


class AgentRunRecord(BaseModel):
    run: AgentRunBase
    calls: list[ModelCallBase]


def _public(run: AgentRun) -> AgentRunBase:
    return AgentRunBase.model_validate(run.model_dump())


@router.post("", status_code=status.HTTP_201_CREATED)
async def start_agent_run(
    body: AgentRunRequest,
    request: Request,
    runs: AgentRunsDep,
    presets: PresetsDep,
    endpoints: EndpointsDep,
    settings: SettingsDep,
    access: AccessDep,
    caller: CallerDep,
) -> AgentRunStarted:
    """Start a run; its credential is in this answer only."""
    owner = preset_owner(caller, access)
    preset = await asyncio.to_thread(presets.get, owner, body.preset)
    endpoint = await asyncio.to_thread(endpoints.get, body.endpoint)
    if not access.may_use(caller, endpoint.owner, private=endpoint.private):
        raise NotFoundError(f"no endpoint {body.endpoint!r}; list them with GET /api/endpoints")
    asked = body.limits
    limits = {
        "max_calls": min(asked.max_calls or settings.agent_run_max_calls, settings.agent_run_max_calls),
        "max_output_tokens": min(
            asked.max_output_tokens or settings.agent_run_max_output_tokens, settings.agent_run_max_output_tokens
        ),
        "wall_s": min(asked.wall_s or settings.agent_run_wall_s, settings.agent_run_wall_s),
    }
    run, credential = await asyncio.to_thread(
        runs.create,
        owner,
        endpoint.id,
        endpoint.environment,
        endpoint.revision,
        body.harness,
        preset.name,
        preset.model,
        body.task,
        limits,
        settings.agent_run_ttl_s,
    )
    base = connection_base(settings, request)
    return AgentRunStarted(
        run=_public(run),
        credential=credential,
        model_url=f"{base}/model/v1",
        anthropic_base_url=f"{base}/model",
        mcp_url=endpoint_url(base, endpoint.id) + "/mcp",
        headers={"X-Envhub-Run": credential},
    )


@router.get("")
def list_agent_runs(runs: AgentRunsDep, access: AccessDep, caller: CallerDep) -> list[AgentRunBase]:
    """Your newest runs (the admin's: everyone's)."""
    return [_public(run) for run in runs.list_visible(access, caller, newest=LISTED)]


@router.get("/{run_id}")
def read_agent_run(run_id: str, runs: AgentRunsDep, access: AccessDep, caller: CallerDep) -> AgentRunRecord:
    """The run and its model calls, in order."""
    run = runs.visible(access, caller, run_id)
    calls = [ModelCallBase.model_validate(call.model_dump()) for call in runs.calls(run_id)]
    return AgentRunRecord(run=_public(run), calls=calls)


@router.post("/{run_id}/end")
async def end_agent_run(
    run_id: str, runs: AgentRunsDep, ends: RunEndsDep, access: AccessDep, caller: CallerDep
) -> AgentRunBase:
    """End the run (stopped, by its owner): its credential is refused from then on, its MCP door sessions end (their
    slots back), and its reward is settled from their episodes. A run already over stays as it ended."""
    await asyncio.to_thread(runs.visible, access, caller, run_id)
    ended = await ends.end(run_id, AgentRunStatus.STOPPED, "", "ended by its owner")
    assert ended is not None
    return _public(ended)
