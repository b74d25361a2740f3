"""Evaluations' tables (runs, their episodes and those episodes' steps, the model presets runs may name, agent
sessions, whose episodes are kept as a run's are, and agent runs with their model calls) and the public shapes the
API returns of them."""

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import BigInteger
from sqlmodel import JSON, Field, SQLModel

from core.clock import utcnow


class EvaluationStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    CANCELLED = "cancelled"
    FAILED = "failed"  # it could not run at all: the endpoint did not start, the environment did not answer
    INTERRUPTED = "interrupted"  # envhub stopped while it ran; its finished episodes are kept


UNDER_WAY = (EvaluationStatus.QUEUED, EvaluationStatus.RUNNING)


class EvaluationBase(SQLModel):
    id: str = Field(primary_key=True)
    environment: str = Field(index=True)
    revision: str | None = Field(default=None, description="the environment's revision it ran on")
    endpoint: str | None = Field(default=None, description="the endpoint it played through")
    launched: bool = Field(default=False, description="envhub launched the endpoint for this run")
    private: bool = Field(default=False, description="played on a private endpoint: its owner's and the admin's only")
    policy: dict[str, Any] = Field(default_factory=dict, sa_type=JSON, description="model and sampling; no key")
    policy_label: str = Field(index=True)
    taskset: dict[str, Any] = Field(default_factory=dict, sa_type=JSON, description="the seeds or the tasks")
    taskset_label: str = Field(description="what it is comparable on: 'seeds', 'split:test', 'dataset:...'")
    episodes_planned: int
    concurrency: int
    limits: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    status: EvaluationStatus = Field(default=EvaluationStatus.QUEUED, index=True)
    message: str = ""
    code: str = Field(default="", description="why it failed, when it did: a code beside the message")
    owner: str | None = Field(default=None, index=True)
    summary: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    statistical_report: int | None = Field(
        default=None, description="the statistical report whose reference player it is; kept off leaderboards"
    )


class Evaluation(EvaluationBase, table=True):
    instance: str = Field(default="", description="the envhub instance that runs it")
    # Kept from the run's start, so that the run stays as private as its endpoint was, whatever becomes of it.
    endpoint_owner: str | None = Field(default=None, description="a private endpoint's owner, who may see the run")


class EpisodeBase(SQLModel):
    id: str = Field(primary_key=True, description="<evaluation>-<index>; the share link's id")
    evaluation: str = Field(index=True)
    index: int
    seed: int | None = None
    task: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    status: str = Field(
        description="done, invalid (the environment ended it on an action it refused), cut (a limit) or failed"
    )
    error: str | None = None
    code: str = Field(default="", description="why it ended before done, beside the error: max_steps, idle ...")
    reward: float
    final_reward: float | None = None
    success: bool | None = None
    steps: int
    invalid: int
    tokens: int
    wall_s: float
    finished_at: datetime = Field(default_factory=utcnow)


class Episode(EpisodeBase, table=True):
    records: list[dict[str, Any]] = Field(
        default_factory=list,
        sa_type=JSON,
        description="an agent session's episode: the reset, then each step; a run's are its EpisodeStep rows",
    )
    size: int = Field(default=0, description="an agent session's: bytes of the episode as JSON, which budgets count")


class EpisodeStep(SQLModel, table=True):
    """One record of a run's episode, stored as it was played: the reset (index 0), then each step."""

    episode: str = Field(primary_key=True, description="the episode's id")
    index: int = Field(primary_key=True)
    record: dict[str, Any] = Field(sa_type=JSON)


class EpisodePublic(EpisodeBase):
    records: list[dict[str, Any]] = []


class EvaluationPublic(EvaluationBase):
    episodes: list[EpisodeBase] = []


class EvaluationsPublic(SQLModel):
    data: list[EvaluationBase]
    count: int


class LeaderboardRow(SQLModel):
    evaluation: str
    policy: str
    baseline: bool
    mean_reward: float | None
    ci95: float | None
    success_rate: float | None
    episodes: int
    invalid_rate: float | None
    date: datetime


class LeaderboardGroup(SQLModel):
    revision: str | None
    taskset: str
    rows: list[LeaderboardRow]


class Leaderboard(SQLModel):
    environment: str
    groups: list[LeaderboardGroup]
    note: str = "Runs compare only within a group: the same environment revision and the same task set."


class AgentSessionBase(SQLModel):
    """An MCP session an agent harness played through an endpoint's MCP door; its episodes are `Episode` rows whose
    `evaluation` is the session's id."""

    id: str = Field(primary_key=True, description="as-...; not the Mcp-Session-Id, which stays the client's")
    endpoint: str = Field(index=True)
    environment: str = Field(index=True)
    revision: str | None = None
    client: str = Field(default="", description="the MCP client, as it named itself at initialize")
    protocol_version: str = ""
    owner: str | None = Field(default=None, description="who the session's bearer proved to be")
    run: str | None = Field(default=None, index=True, description="the agent run it played for (its X-Envhub-Run)")
    client_session: str | None = Field(default=None, description="the harness's own session id, as its header said")
    tools: list[str] = Field(default_factory=list, sa_type=JSON)
    status: str = Field(default="open", description="open, or ended")
    message: str = Field(default="", description="why it ended")
    code: str = Field(default="", description="why it ended, as a code: idle, client_ended, run_ended ...")
    episode_count: int = 0
    reward: float = Field(default=0.0, description="the reward of its episodes, summed")
    steps: int = 0
    dropped: int = Field(default=0, description="episodes let go, the oldest first, to keep within recording budgets")
    created_at: datetime = Field(default_factory=utcnow)
    ended_at: datetime | None = None


class AgentSession(AgentSessionBase, table=True):
    instance: str = Field(default="", description="the envhub process whose door holds it")
    holder: str = Field(default="", index=True, description="whose recording budget it counts: user:..., address:...")


class AgentSessionPublic(AgentSessionBase):
    episodes: list[EpisodePublic] = []


class AgentSessionsPublic(SQLModel):
    data: list[AgentSessionBase]
    count: int


class ModelPresetBase(SQLModel):
    """A model saved under a name by its owner, to evaluate again without typing it (or its key) again."""

    owner: str = Field(primary_key=True, description="a user's name, or ':local' (see evals.presets)")
    name: str = Field(primary_key=True)
    base_url: str
    model: str
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = Field(default=None, sa_type=BigInteger)
    timeout_s: float = 60
    system_prompt: str | None = None
    token_ids: bool = Field(default=False, description="the server returns token ids and log-probs (vLLM)")
    updated_at: datetime = Field(default_factory=utcnow)


class ModelPreset(ModelPresetBase, table=True):
    api_key_sealed: str | None = Field(default=None, description="the model's API key, sealed; never kept in clear")


class ModelPresetPublic(ModelPresetBase):
    has_api_key: bool


class ModelPresetsPublic(SQLModel):
    data: list[ModelPresetPublic]
    count: int


class AgentRunStatus(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"  # the harness or the model server broke it
    STOPPED = "stopped"  # a limit, its owner, or its expiry ended it


class AgentRunBase(SQLModel):
    """One harness x model preset x endpoint x task: the model calls the harness sent through the model door, joined
    (by the run's credential) to the episodes its MCP sessions played through the endpoint's door."""

    id: str = Field(primary_key=True, description="ar-<12 hex>")
    owner: str | None = Field(default=None, index=True)
    endpoint: str = Field(index=True)
    environment: str = Field(index=True)
    revision: str | None = None
    harness: str = Field(index=True, description="claude-code, codex, opencode, qwen-code, or own")
    preset: str = Field(description="the owner's model preset the door forwards to")
    model: str = Field(description="the preset's model name, kept as it was when the run started")
    task: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    status: str = Field(default=AgentRunStatus.RUNNING, index=True, description="an AgentRunStatus")
    code: str = Field(default="", description="the error code that ended it, if one did")
    message: str = ""
    expires_at: datetime
    limits: dict[str, Any] = Field(default_factory=dict, sa_type=JSON, description="calls, output tokens, wall time")
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    reward: float | None = Field(default=None, description="its episodes' reward; None when none was given, not 0")
    client_sessions: list[str] = Field(default_factory=list, sa_type=JSON, description="the harness's own ids")
    created_at: datetime = Field(default_factory=utcnow)
    ended_at: datetime | None = None


class AgentRun(AgentRunBase, table=True):
    credential_hash: str = Field(description="sha256 of the run's credential; the credential itself is not kept")
    instance: str = Field(default="", description="the envhub process that serves it")


class ModelCallBase(SQLModel):
    """One request a harness sent through the model door, and what came back."""

    id: str = Field(primary_key=True, description="<run>-<index>")
    run: str = Field(index=True)
    index: int
    dialect: str = Field(description="chat, responses or messages")
    stream: bool = False
    status: int = Field(description="the HTTP status the harness got")
    code: str = Field(default="", description="envhub's error code when the door answered for the model")
    started_at: datetime = Field(default_factory=utcnow)
    wall_s: float = 0.0
    first_token_s: float | None = Field(default=None, description="streamed calls: until the first event")
    request: dict[str, Any] = Field(default_factory=dict, sa_type=JSON, description="the body, never its headers")
    response: dict[str, Any] | None = Field(default=None, sa_type=JSON, description="in the non-streamed shape")
    text: str = ""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list, sa_type=JSON, description="{id, name, arguments}")
    finish_reason: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict, sa_type=JSON, description="input_tokens, output_tokens")
    prompt_token_ids: list[int] | None = Field(default=None, sa_type=JSON)
    completion_token_ids: list[int] | None = Field(default=None, sa_type=JSON)
    completion_logprobs: list[float] | None = Field(default=None, sa_type=JSON)
    client_session: str | None = None


class ModelCall(ModelCallBase, table=True):
    pass
