"""Starting evaluations, from the API, the UI or the CLI alike: a request is checked (who asks, where it
plays, the model's URL), recorded as a queued run, and handed to the runner with what it plays with.

A run plays through a running endpoint's gateway, or through an endpoint launched for it (as the
caller, within their limits) and stopped when it ends. A private endpoint is played on by its owner
and the admin only, and its runs are shown to them only. On a server with sign-in, everyone but the
admin is capped: runs at once, episodes, concurrency and steps (settings); without sign-in the server
is its user's own machine.
"""

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError
from sqlalchemy import Engine
from sqlmodel import Session

from app.settings import Settings
from app.usecases.harness_jobs import HarnessChoice, HarnessJobs, HarnessPolicy
from catalog.store import load_environment
from catalog.tasksets import Tasksets, dataset_resets
from core.callers import Access, Caller
from core.errors import ConflictError, ForbiddenError, InvalidInputError, NotFoundError
from core.outbound import OutboundGuard, live_session
from core.sealing import EndpointTokens
from envclient.interface import read_interface
from evals.agent_sessions import AgentSessions
from evals.models import Episode, Evaluation
from evals.presets import ModelPresets, preset_owner
from evals.runs import Play, PrepareError, Runner, new_evaluation_id
from evals.store import EvaluationStore
from gateway.paths import gateway_path
from hosting.endpoints import EndpointManager
from hosting.models import Backend, Endpoint, EndpointStatus
from hosting.options import LaunchRequest
from rollout.episodes import EpisodeSpec, Limits
from rollout.harness import Brief
from rollout.model import ModelConfig, ModelPolicy
from rollout.players import BASELINES, Policy

__all__ = [
    "EvaluationRequest",
    "Evaluator",
    "HarnessChoice",
    "ModelChoice",
    "PresetChoice",
    "ensure_sessions_visible",
    "run_shown",
    "visible_episode",
    "visible_run",
]

MAX_EPISODES = 1000


class ModelChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: ModelConfig


class PresetChoice(BaseModel):
    """A model the caller saved (PUT /api/models/{name}), its key included."""

    model_config = ConfigDict(extra="forbid")
    preset: str


class EvaluationRequest(BaseModel):
    """What to evaluate, with which policy, on which episodes."""

    model_config = ConfigDict(extra="forbid")

    environment: str | None = Field(default=None, description="launch an endpoint of it for the run")
    endpoint: str | None = Field(default=None, description="a running endpoint to play through")
    backend: Backend = Field(default=Backend.PROCESS, description="where to launch, with `environment`")
    policy: Literal["random", "first-legal"] | ModelChoice | PresetChoice | HarnessChoice = "random"
    episodes: int | None = Field(default=None, ge=1, le=MAX_EPISODES, description="seeds 0..N-1")
    seeds: list[int] | None = Field(default=None, min_length=1, max_length=MAX_EPISODES)
    split: str | None = Field(default=None, description="a Task API split, or the dataset's with `dataset`")
    indices: list[int] | None = Field(
        default=None, min_length=1, max_length=MAX_EPISODES, description="the split's tasks (or rows) to play"
    )
    dataset: str | None = Field(default=None, description="a linked dataset whose rows reset the episodes")
    concurrency: int = Field(default=1, ge=1, le=64)
    max_steps: int = Field(default=100, ge=1, le=10_000)
    max_tokens: int | None = Field(default=None, ge=1, description="per episode")
    episode_s: float = Field(default=600, gt=0, le=3600, description="wall-clock limit per episode")
    retries: int = Field(default=3, ge=0, le=10, description="invalid replies allowed per step")

    @model_validator(mode="after")
    def _one_of_each(self) -> Self:
        if (self.environment is None) == (self.endpoint is None):
            raise PydanticCustomError(
                "environment_or_endpoint", "name either an environment (launched for the run) or a running endpoint"
            )
        chosen = [name for name in ("episodes", "seeds", "indices") if getattr(self, name) is not None]
        if len(chosen) > 1:
            raise PydanticCustomError(
                "episodes_seeds_or_indices",
                "give one of episodes, seeds or indices, not {chosen}",
                {"chosen": " and ".join(chosen)},
            )
        if self.split is None and (self.indices is not None or self.dataset is not None):
            raise PydanticCustomError("split_required", "indices and a dataset need the split they come from")
        if self.split is not None and self.seeds is not None:
            raise PydanticCustomError(
                "seeds_with_split",
                "a split's tasks choose the episodes: give episodes (its first N) or indices, not seeds",
            )
        return self

    def task_indices(self) -> list[int]:
        """The split's tasks (or the dataset's rows) to play: those named, else the first `episodes`."""
        return self.indices if self.indices is not None else list(range(self.episodes or 1))

    def specs(self, resets: list[dict[str, Any]] | None = None) -> list[EpisodeSpec]:
        """The episodes to play; `resets` are the dataset rows' reset options, one per episode."""
        if resets is not None:
            return [EpisodeSpec(i, task=options) for i, options in enumerate(resets)]
        if self.split is not None:
            return [EpisodeSpec(i, task={"split": self.split, "index": n}) for i, n in enumerate(self.task_indices())]
        seeds = self.seeds if self.seeds is not None else list(range(self.episodes or 1))
        return [EpisodeSpec(i, seed=seed) for i, seed in enumerate(seeds)]

    def taskset(self, dataset_revision: str | None = None) -> tuple[dict[str, Any], str]:
        """The run's record of what it played, and the label runs are compared on."""
        if self.dataset is not None:
            pinned = f"{self.dataset}@{(dataset_revision or '')[:12]}"
            record = {"dataset": self.dataset, "revision": dataset_revision, "split": self.split}
            return record | {"indices": self.task_indices()}, f"dataset:{pinned}:{self.split}"
        if self.split is not None:
            return {"split": self.split, "indices": self.task_indices()}, f"split:{self.split}"
        return {"seeds": [s.seed for s in self.specs()]}, "seeds"

    def limits(self) -> Limits:
        return Limits(self.max_steps, self.max_tokens, self.episode_s, self.retries)


def _policy(choice: Literal["random", "first-legal"] | ModelChoice, guard: OutboundGuard) -> Policy:
    return ModelPolicy(choice.model, guard) if isinstance(choice, ModelChoice) else BASELINES[choice]


def _capped(access: Access, caller: Caller) -> bool:
    """Whether the caps apply: to everyone but the admin on a server with sign-in."""
    return access.sign_in and not caller.admin


def _ensure_within_caps(settings: Settings, body: EvaluationRequest) -> None:
    asked = {
        "episodes": (len(body.specs()), settings.max_evaluation_episodes, "ENVHUB_MAX_EVALUATION_EPISODES"),
        "concurrency": (body.concurrency, settings.max_evaluation_concurrency, "ENVHUB_MAX_EVALUATION_CONCURRENCY"),
        "max_steps": (body.max_steps, settings.max_evaluation_steps, "ENVHUB_MAX_EVALUATION_STEPS"),
    }
    over = [
        f"{name} {value} (at most {most}, {setting})" for name, (value, most, setting) in asked.items() if value > most
    ]
    if over:
        raise InvalidInputError(
            f"this server caps what one evaluation asks for, and this one asks for {'; '.join(over)}: ask for less, "
            "or run the evaluation on your own machine (python -m app eval)"
        )


def ensure_sessions_visible(endpoints: EndpointManager, caller: Caller, endpoint_id: str) -> None:
    """As for the endpoint itself: who may stop a private endpoint (its owner, the admin) may read the agent sessions
    its MCP door played; anyone else is told there is no such endpoint."""
    endpoint = endpoints.get(endpoint_id)
    if not endpoints.access.may_use(caller, endpoint.owner, private=endpoint.private):
        raise NotFoundError(f"no endpoint {endpoint_id!r}; list them with GET /api/endpoints")


def run_shown(access: Access, caller: Caller) -> Callable[[Evaluation], bool]:
    """Which runs the caller is shown: a run on a private endpoint is, as the endpoint itself, its owner's and the
    admin's only; the others are everyone's."""
    return lambda run: access.may_use(caller, run.endpoint_owner, private=run.private)


def visible_run(store: EvaluationStore, access: Access, caller: Caller, evaluation_id: str) -> Evaluation:
    """A run by its id, for whoever is shown it (see run_shown); to anyone else there is no such run."""
    run = store.get(evaluation_id)
    if not run_shown(access, caller)(run):
        raise NotFoundError(f"no evaluation {evaluation_id!r}")
    return run


def visible_episode(
    store: EvaluationStore, agents: AgentSessions, endpoints: EndpointManager, caller: Caller, episode_id: str
) -> Episode:
    """An episode by its id, as the share link opens it: for whoever is shown its run, or may read the sessions of
    the endpoint its agent session played on; to anyone else there is no such episode."""
    episode = store.episode(episode_id)
    endpoint_id = agents.endpoint_of(episode.evaluation)
    try:
        if endpoint_id is not None:
            ensure_sessions_visible(endpoints, caller, endpoint_id)
        else:
            visible_run(store, endpoints.access, caller, episode.evaluation)
    except NotFoundError:
        raise NotFoundError(f"no episode {episode_id!r}") from None
    return episode


def _ensure_may_play_on(access: Access, caller: Caller, endpoint: Endpoint) -> None:
    # Who may stop an endpoint (its owner, the admin) is who may play on a private one.
    if not access.may_use(caller, endpoint.owner, private=endpoint.private):
        owner = endpoint.owner or "nobody signed in"
        raise ForbiddenError(
            f"endpoint {endpoint.id} is private to {owner}: only they or an admin can evaluate on it; "
            "name its environment instead to launch an endpoint of your own for the run",
            code="endpoint_private",
        )


@dataclass(frozen=True)
class Evaluator:
    """Starts evaluation runs: what a run is checked against, recorded in, played with and handed to."""

    settings: Settings  # the caps, and how long a launched endpoint may take to start
    engine: Engine  # the catalog the environment is read from
    endpoints: EndpointManager  # played on, or launched for the run
    presets: ModelPresets
    guard: OutboundGuard  # the model's URL, and the session to the endpoint, go through it
    tasksets: Tasksets
    store: EvaluationStore
    runner: Runner
    tokens: EndpointTokens  # a private endpoint's bearer token, for the run's own session
    harnesses: HarnessJobs  # runs a harness CLI per episode, when the policy is one

    async def start(
        self,
        body: EvaluationRequest,
        caller: Caller,
        client: str | None,
        gateway: Callable[[str], str],
        chosen: Policy | None = None,
        statistical_report: int | None = None,
    ) -> Evaluation:
        """Check the request, record the run queued, and start it; `gateway(endpoint_id)` is the URL this
        server reaches an endpoint's gateway at, and a dataset's files downloaded count against `client` (None: nobody's
        but the dataset's and the hour's). `chosen` plays instead of the request's policy (the statistical lane's
        adversarial panel and replays, which no request names); `statistical_report` marks the run as that report's
        reference player."""
        access = self.endpoints.access
        access.ensure_may_launch(caller)
        capped = _capped(access, caller)
        if capped:
            _ensure_within_caps(self.settings, body)
        # The slot is held from before the first wait until the run is on record, so that requests at once count too.
        async with self.runner.slot(caller.name, self.settings.max_evaluations_per_owner if capped else None):
            return await self._start(body, caller, client, gateway, chosen, statistical_report)

    async def wait_running(self, endpoint_id: str) -> None:
        """Wait for a launched endpoint to run; PrepareError when it fails or takes too long."""
        deadline = asyncio.get_running_loop().time() + self.settings.launch_timeout_s + 30
        while True:
            endpoint = await asyncio.to_thread(self.endpoints.get, endpoint_id)
            if endpoint.status == EndpointStatus.RUNNING and self.endpoints.resolve(endpoint_id) is not None:
                return
            if endpoint.status not in (EndpointStatus.STARTING, EndpointStatus.RUNNING):
                raise PrepareError(f"endpoint {endpoint_id} did not start: {endpoint.message}", "endpoint_failed")
            if asyncio.get_running_loop().time() > deadline:
                raise PrepareError(
                    f"endpoint {endpoint_id} did not start in time: {endpoint.message}", "endpoint_start_timeout"
                )
            await asyncio.sleep(0.5)

    async def _start(
        self,
        body: EvaluationRequest,
        caller: Caller,
        client: str | None,
        gateway: Callable[[str], str],
        chosen: Policy | None,
        statistical_report: int | None,
    ) -> Evaluation:
        manager = self.endpoints
        endpoint: Endpoint | None = None
        if body.endpoint is not None:
            endpoint = await asyncio.to_thread(manager.get, body.endpoint)
            _ensure_may_play_on(manager.access, caller, endpoint)
            if endpoint.status != EndpointStatus.RUNNING:
                raise ConflictError(
                    f"endpoint {endpoint.id} is {endpoint.status.value}; "
                    "start it, or name the environment to launch one"
                )
            environment_id = endpoint.environment
        else:
            environment_id = str(body.environment)
        environment = await asyncio.to_thread(load_environment, self.engine, environment_id)
        choice = body.policy
        harness: HarnessPolicy | None = None
        if isinstance(choice, HarnessChoice):
            preset = await asyncio.to_thread(self.presets.get, preset_owner(caller, manager.access), choice.preset)
            harness = self.harnesses.policy(choice, preset)  # harness_missing now, before anything is started
            choice = "random"  # not played: the harness plays each episode whole
        elif isinstance(choice, PresetChoice):
            owner = preset_owner(caller, manager.access)
            choice = ModelChoice(model=self.presets.config_of(self.presets.get(owner, choice.preset)))
        if isinstance(choice, ModelChoice):
            await self.guard.resolve(choice.model.base_url)  # a model on a private address only where allowed
        resets, dataset_revision = None, None
        if body.dataset is not None:

            def read_rows() -> tuple[list[dict[str, Any]], str]:
                with Session(self.engine) as session:
                    rows = body.task_indices()
                    dataset, split = str(body.dataset), str(body.split)
                    return dataset_resets(session, self.tasksets, environment, dataset, split, rows, client)

            resets, dataset_revision = await asyncio.to_thread(read_rows)
        launched = None
        if body.endpoint is None:
            launched = await asyncio.to_thread(
                manager.launch, LaunchRequest(environment=environment_id, backend=body.backend), caller
            )
        endpoint_id = body.endpoint or (launched.id if launched else "")
        taskset, taskset_label = body.taskset(dataset_revision)
        policy: Policy = chosen or (harness if harness is not None else _policy(choice, self.guard))
        specs = body.specs(resets)
        # A run is as private as the endpoint it plays on (one launched for it is the caller's own, not private).
        private = endpoint is not None and endpoint.private
        row = Evaluation(
            id=new_evaluation_id(),
            environment=environment.id,
            revision=launched.revision if launched is not None else endpoint.revision if endpoint is not None else None,
            endpoint=endpoint_id,
            launched=launched is not None,
            private=private,
            endpoint_owner=endpoint.owner if endpoint is not None and private else None,
            policy=policy.described(),
            policy_label=policy.label,
            taskset=taskset,
            taskset_label=taskset_label,
            episodes_planned=len(specs),
            concurrency=body.concurrency,
            limits=body.limits().__dict__,
            owner=caller.name,
            message="starting its endpoint" if launched else "starting",
            statistical_report=statistical_report,
        )
        await asyncio.to_thread(self.store.create, row)
        url = gateway(endpoint_id)

        async def stop_launched() -> None:
            if launched is not None:
                await asyncio.to_thread(manager.end, launched.id, f"evaluation {row.id} ended")

        async def prepare() -> Play:
            # A private endpoint's gateway wants its bearer token; the run holds it for its own session only.
            outbound = live_session(self.guard, url, credentials={url: self.tokens.header(endpoint_id)})
            try:
                if launched is not None:
                    await self.wait_running(launched.id)
                interface = await read_interface(url, outbound)
                if interface.action_schema is None and not interface.tools:
                    raise PrepareError(
                        f"{environment.id} describes no action (no /schema, no MCP tools): {interface.problems}",
                        "no_action",
                    )
                if (
                    body.dataset is None
                    and body.split is not None
                    and body.split not in {s.name for s in interface.splits}
                ):
                    named = ", ".join(s.name for s in interface.splits)
                    raise PrepareError(
                        f"{environment.id} has no task split {body.split!r}; "
                        + (f"its splits are {named}" if named else "it takes no tasks (it serves no Task API)"),
                        "split_unknown" if named else "no_task_api",
                    )
            except BaseException:
                await outbound.aclose()
                await policy.aclose()
                await stop_launched()
                raise
            brief = Brief(environment.id, environment.readme, interface.action_schema, interface.tools or ())
            player = None
            if harness is not None:
                played_on = await asyncio.to_thread(manager.get, endpoint_id)
                base = url.removesuffix(gateway_path(endpoint_id))
                owner = preset_owner(caller, manager.access)
                headers = self.tokens.header(endpoint_id) if private else {}
                player = self.harnesses.player(harness, owner, played_on, base, headers, brief, body.limits())
            return Play(
                url, outbound, policy, brief, specs, body.limits(), body.concurrency, after=stop_launched, player=player
            )

        self.runner.start(row, prepare)
        return row
