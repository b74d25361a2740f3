"""envhub runs the four real agent-harness CLIs headless: each, with its generated configuration, plays an episode
of an endpoint's environment through the MCP door with a scripted model, joined by the run's header; a hung one is
killed whole at its wall-time limit."""

import os
from pathlib import Path
from typing import Any

import pytest

from evals.harnesses import HARNESSES, RUN_HEADER, HarnessRun, run_headless
from tests.conftest import HARNESS_DIR, needs_harness, wait_until
from tests.scripted_model import Ask, ScriptedModel, Seen, Turn, ask_of, play
from tests.serving import Envhub

CREDENTIAL = "envhub-run.ar-0123456789ab.s3cret-of-the-run"
PROMPT = "Count to ten with the step tool, adding 10 at once."
# The tool every CLI is offered, under its own naming: the environment's step, whatever prefix the CLI gives it.
TOOL = "step"


def model_base(scripted: ScriptedModel) -> str:
    """Where the CLIs' model is: the scripted server itself until envhub's model door stands in front of it."""
    return scripted.url


def a_run(endpoint: dict[str, Any], model_url: str) -> HarnessRun:
    return HarnessRun(
        model_url=model_url,
        credential=CREDENTIAL,
        model="scripted-model",
        mcp_name="envhub",
        mcp_url=f"{endpoint['url']}/mcp?seed=7",  # a seed: the door resets the count environment as the session opens
        mcp_headers={RUN_HEADER: CREDENTIAL},
        tools=(TOOL, "state"),
        prompt=PROMPT,
    )


@pytest.mark.parametrize("name", [pytest.param(name, marks=needs_harness(name)) for name in HARNESSES])
def test_a_harness_cli_plays_an_episode_to_its_reward_through_the_mcp_door(
    envhub: Envhub, harness_cli: Any, name: str, tmp_path: Path
) -> None:
    harness_cli(name)
    endpoint = envhub.running("template:count")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    scripted = ScriptedModel(play(TOOL, [{"add": 10}], "Counted to ten."))
    try:
        run = a_run(endpoint, model_base(scripted))
        outcome = run_headless(HARNESSES[name], run, cache_dir=HARNESS_DIR, wall_s=120, scratch_dir=scratch)
    finally:
        scripted.close()
    assert (outcome.exit_status, outcome.code) == (0, ""), outcome.stderr_tail + outcome.stdout_tail
    assert list(scratch.iterdir()) == []  # the scratch home is gone

    [session] = envhub.http.get(f"/api/endpoints/{endpoint['id']}/sessions").json()["data"]
    detail = envhub.http.get(f"/api/endpoints/{endpoint['id']}/sessions/{session['id']}").json()
    [episode] = [episode for episode in detail["episodes"] if episode["steps"] > 0]
    assert episode["status"] == "done" and episode["reward"] == 1.0
    steps = [record for record in episode["records"] if record["kind"] == "step"]
    assert [(step["tool"], step["arguments"]) for step in steps] == [(TOOL, {"add": 10})]

    # The model saw the CLI's own system prompt and, among the tools it offered, the environment's.
    asked = [ask for ask in map(asked_of, scripted.seen) if any(environments(tool) for tool in ask.tools)]
    assert asked, [seen.path for seen in scripted.seen]
    assert all(seen.headers.get(RUN_HEADER.lower()) == CREDENTIAL for seen in scripted.seen)
    assert len(asked[0].system) > 1000  # the harness's own system prompt: ours is one line
    assert not all(environments(tool) for tool in asked[0].tools)  # the harness's own tools beside the environment's


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def environments(tool: str) -> bool:
    """Whether an offered tool is the environment's step, under the CLI's naming (mcp__envhub__step, envhub_step)."""
    return tool.startswith(("mcp__envhub", "envhub")) and tool.endswith(TOOL)


def asked_of(seen: Seen) -> Ask:
    """What a request asked, in its dialect."""
    dialect = next((d for d in ("messages", "responses") if seen.path.split("?")[0].endswith(d)), "chat")
    return ask_of(dialect, seen.body)


@needs_harness("qwen-code")
def test_a_harness_that_hangs_is_killed_whole_at_its_wall_time_limit(
    envhub: Envhub, harness_cli: Any, tmp_path: Path
) -> None:
    harness_cli("qwen-code")
    endpoint = envhub.running("template:count")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    scripted = ScriptedModel(lambda ask: Turn(text="late", delay_s=600))
    try:
        outcome = run_headless(
            HARNESSES["qwen-code"],
            a_run(endpoint, model_base(scripted)),
            cache_dir=HARNESS_DIR,
            wall_s=5,
            scratch_dir=scratch,
        )
    finally:
        scripted.close()
    assert (outcome.timed_out, outcome.exit_status, outcome.code) == (True, None, "harness_timeout")
    wait_until(lambda: not group_alive(outcome.pid))  # its last processes, killed, are reaped by init
    assert list(scratch.iterdir()) == []
