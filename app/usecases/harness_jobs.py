"""Harness runs as envhub's job: an evaluation whose policy is a harness CLI with one of its owner's model presets.

Each episode is an agent run: its credential minted, the CLI run headless in the process backend's sandbox
(harness_runs.py) with its model at envhub's model door and its tools at the endpoint's MCP door, whose first reset
is the episode's seed or task (the URL's query); then the run is ended (its door sessions with it) and the episode
is the door's: its reward, steps and status, with a record pointing at the agent run.
"""

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlencode

from pydantic import BaseModel, ConfigDict

from app.agent_run_ends import RunEnds
from app.settings import Settings
from app.usecases.harness_runs import run_harness
from evals.agent_runs import AgentRuns, door_side
from evals.harnesses import RUN_HEADER, Harness, HarnessOutcome, HarnessRun, find, harness_named
from evals.models import AgentRun, AgentRunStatus, Episode, ModelPreset
from evals.runs import EpisodePlayer, Keep
from gateway.mcp.tools import STATE, STEP
from gateway.paths import gateway_path
from hosting.models import Endpoint
from hosting.runtimes.confinement import Confinement
from rollout.episodes import EpisodeResult, EpisodeSpec, Limits
from rollout.harness import Brief, readme_excerpt
from rollout.players import Player

__all__ = ["HarnessChoice", "HarnessJobs", "HarnessPolicy", "mcp_query"]

MCP_NAME = "envhub"  # the MCP server's name in the CLI's configuration: its tools are mcp__envhub__step, envhub_step


class HarnessChoice(BaseModel):
    """A harness CLI envhub runs headless per episode, its model one of the caller's presets."""

    model_config = ConfigDict(extra="forbid")
    harness: Literal["claude-code", "codex", "opencode", "qwen-code"]
    preset: str


@dataclass(frozen=True)
class HarnessPolicy:
    """What an evaluation records of its harness (never a key), and how the leaderboard names it: by harness and
    model, so that runs of one harness with one model group together."""

    harness: Harness
    preset: str
    model: str

    @property
    def kind(self) -> str:
        return "harness"

    @property
    def label(self) -> str:
        return f"{self.harness.name} · {self.model}"

    def described(self) -> dict[str, Any]:
        return {
            "kind": "harness",
            "harness": self.harness.name,
            "version": self.harness.version,
            "model": self.model,
            "preset": self.preset,
        }

    def player(self, brief: Brief, seed: int | None) -> Player:
        raise TypeError("a harness plays whole episodes (Play.player), not step by step")

    async def aclose(self) -> None:
        return None


def mcp_query(spec: EpisodeSpec) -> str:
    """The episode's first reset as the MCP door's URL takes it: ?seed=N, ?split=S&index=I (a dataset's row:
    its reset options as options=JSON)."""
    task = dict(spec.task or {})
    query: dict[str, Any] = {name: task.pop(name) for name in ("split", "index") if name in task}
    if spec.seed is not None:
        query["seed"] = spec.seed
    if task:
        query["options"] = json.dumps(task)
    return urlencode(query)


def _prompt(brief: Brief, tools: tuple[str, ...]) -> str:
    excerpt = readme_excerpt(brief.readme)
    lines = [
        f"You are playing {brief.name}, an environment served to you as the MCP server {MCP_NAME!r}.",
        "Its episode has been started for you. Play this one episode to its end with the tools "
        f"({', '.join(tools)}): each call answers with the observation, the reward and whether the episode is done. "
        "Stop once it is done.",
    ]
    if excerpt:
        lines += ["", "From the environment's README:", "", excerpt]
    return "\n".join(lines)


def _tools(brief: Brief) -> tuple[str, ...]:
    """The environment's tools the CLI may call: its own, or the door's generated step and state (not reset: the
    episode is the one the URL started)."""
    return tuple(tool.name for tool in brief.tools) if brief.uses_tools else (STEP, STATE)


@dataclass(frozen=True)
class HarnessJobs:
    """What a harness job runs with: the CLIs' settings, the sandbox, the agent runs and how they end."""

    settings: Settings
    confinement: Confinement
    runs: AgentRuns
    ends: RunEnds

    def policy(self, choice: HarnessChoice, preset: ModelPreset) -> HarnessPolicy:
        """The harness as an evaluation's policy; harness_missing (naming its install command) when it is not
        installed here."""
        harness = harness_named(choice.harness)
        find(harness, self.settings.harness_dir)
        return HarnessPolicy(harness, preset.name, preset.model)

    def player(
        self,
        policy: HarnessPolicy,
        owner: str,
        endpoint: Endpoint,
        base: str,
        mcp_headers: dict[str, str],
        brief: Brief,
        limits: Limits,
    ) -> EpisodePlayer:
        """Plays each episode as an agent run of `owner`'s (whose preset it is) on the endpoint, reached at `base`
        (envhub's own address), with `mcp_headers` (a private endpoint's bearer) sent to its MCP door."""
        tools = _tools(brief)
        episodes = _HarnessEpisodes(self, policy, owner, endpoint, base, mcp_headers, tools, _prompt(brief, tools))
        return lambda spec, keep: episodes.play(spec, keep, limits)


@dataclass(frozen=True)
class _HarnessEpisodes:
    jobs: HarnessJobs
    policy: HarnessPolicy
    owner: str
    endpoint: Endpoint
    base: str
    mcp_headers: dict[str, str]
    tools: tuple[str, ...]
    prompt: str

    async def play(self, spec: EpisodeSpec, keep: Keep, limits: Limits) -> EpisodeResult:
        jobs, settings = self.jobs, self.jobs.settings
        run_limits = {
            "max_calls": settings.agent_run_max_calls,
            "max_output_tokens": min(
                limits.max_tokens or settings.agent_run_max_output_tokens, settings.agent_run_max_output_tokens
            ),
            "wall_s": limits.episode_s,
        }
        run, credential = await asyncio.to_thread(
            jobs.runs.create,
            self.owner,
            self.endpoint.id,
            self.endpoint.environment,
            self.endpoint.revision,
            self.policy.harness.name,
            self.policy.preset,
            self.policy.model,
            spec.reset_options() or None,
            run_limits,
            settings.agent_run_ttl_s,
        )
        query = mcp_query(spec)
        headless = HarnessRun(
            model_url=f"{self.base}/model",
            credential=credential,
            model=self.policy.model,
            mcp_name=MCP_NAME,
            mcp_url=f"{self.base}{gateway_path(self.endpoint.id)}/mcp" + (f"?{query}" if query else ""),
            mcp_headers={RUN_HEADER: credential, **self.mcp_headers},
            tools=self.tools,
            prompt=self.prompt,
        )
        outcome: HarnessOutcome | None = None
        try:
            outcome = await asyncio.to_thread(
                run_harness, settings, jobs.confinement, self.policy.harness.name, headless, limits.episode_s
            )
        finally:  # a cancelled evaluation's run ends too, its door sessions with it
            status = AgentRunStatus.FINISHED if outcome is not None and outcome.ok else AgentRunStatus.FAILED
            code, message = _why(outcome)
            ended = await asyncio.shield(jobs.ends.end(run.id, status, code, message))
        side = await asyncio.to_thread(door_side, jobs.runs.engine, run.id)
        records = [{**r, "door_episode": e.id} for e in side.episodes for r in e.records]
        pointer = {"kind": "agent_run", "run": run.id, "calls": (ended or run).calls, "code": code, "message": message}
        for index, record in enumerate([*records, pointer]):
            await keep({**record, "index": index})
        assert outcome is not None
        return _result(spec, side.episodes, ended or run, outcome, len(records) + 1)


def _why(outcome: HarnessOutcome | None) -> tuple[str, str]:
    """The run's error code and message from how the CLI ended."""
    if outcome is None:
        return "harness_failed", "the harness could not be run"
    if outcome.timed_out:
        return outcome.code, f"the harness ran past its wall time ({outcome.duration_s:.0f} s) and was killed"
    if not outcome.ok:
        last = (outcome.stderr_tail.strip().splitlines() or [""])[-1][:300]
        return outcome.code, f"the harness exited with status {outcome.exit_status}: {last}"
    return "", ""


def _result(
    spec: EpisodeSpec, episodes: list[Episode], run: AgentRun, outcome: HarnessOutcome, records: int
) -> EpisodeResult:
    """The evaluation's episode from the door's: its steps and rewards summed over what the run played (as the
    run's reward is), done when the last episode it stepped in was."""
    played = [e for e in episodes if e.steps or e.invalid] or episodes[-1:]
    last = played[-1] if played else None
    done = last is not None and last.status == "done"
    cut = not done and run.code == "run_limit"
    error, code = None, ""
    if not done:
        why = run.message or (last.error if last is not None and last.error else "")
        code = run.code or "episode_not_done"
        error = f"{code}: " + (why or "the harness ended before the episode was done")
    return EpisodeResult(
        spec,
        records=records,
        steps=sum(e.steps for e in played),
        reward=sum(e.reward for e in played),
        final_reward=last.final_reward if last is not None else None,
        success=last.success if last is not None else None,
        done=done,
        invalid=sum(e.invalid for e in played),
        tokens=run.input_tokens + run.output_tokens,
        wall_s=outcome.duration_s,
        error=error,
        code=code,
        cut=cut,
    )
