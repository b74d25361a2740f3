"""envhub records the four real agent-harness CLIs' runs: each, with its generated configuration, has its model at
envhub's model door (a preset whose server is a scripted model) and its tools at an endpoint's MCP door, joined by
its agent run's credential; the run's record holds the harness's own model calls and the door's episode with its
reward, and exports as SFT rows. As envhub's job, a harness plays an evaluation's episodes one agent run each, and
one that hangs is killed at the episode's wall time, failing its episode with what it recorded kept."""

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.settings import Preload, Settings
from app.ui.snippets import RECORDED, Target, agents
from core.clock import utcnow
from evals.harnesses import HARNESSES, HarnessRun, run_headless
from evals.harnesses.specs import scratch_env
from tests.conftest import ADMIN_TOKEN, HARNESS_DIR, needs_harness, wait_until
from tests.environments import write_count_env
from tests.fakehub import FakeHub
from tests.scripted_model import Ask, ScriptedModel, Turn, ask_of, play
from tests.serving import Envhub

PROMPT = "Count to ten with the step tool, adding 10 at once."
# The tool every CLI is offered, under its own naming: the environment's step, whatever prefix the CLI gives it.
TOOL = "step"
KEY = "sk-scripted-preset-key"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ONE_SLOT = {"env": {"MAX_CONCURRENT_ENVS": "1"}}


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedModel]:
    model = ScriptedModel(play(TOOL, [{"add": 10}], "Counted to ten."))
    yield model
    model.close()


@pytest.fixture(scope="module")
def envhub(tmp_path_factory: pytest.TempPathFactory, scripted: ScriptedModel) -> Iterator[Envhub]:
    """One envhub for the module's runs (each run its own agent run), with the count template and a model preset
    `scripted` whose server is the scripted model. Door sessions keep their slots 10 minutes when nobody calls them,
    so only an episode's end or its run's end frees one sooner."""
    folder = tmp_path_factory.mktemp("harness-runs")
    templates = folder / "templates"
    write_count_env(templates / "count")
    with FakeHub() as hub:
        settings = Settings(
            database_url=f"sqlite:///{folder / 'data' / 'envhub.db'}",
            data_dir=folder / "data",
            hf_endpoint=hub.url,
            hf_token=None,
            admin_token=ADMIN_TOKEN,
            sync_interval_s=0,
            health_interval_s=0,
            templates_dir=templates,
            extra_templates="",
            process_preload=Preload.LAUNCH,
            docker_spares=0,
            allow_private_urls=True,  # the scripted model is on loopback
            mcp_slot_idle_s=600,
        )
        server = Envhub(settings)
        body = {"base_url": scripted.url + "/v1", "model": "scripted-model", "api_key": KEY}
        assert server.http.put("/api/models/scripted", json=body).status_code == 200
        yield server
        server.end_endpoints()
        server.stop()


@pytest.fixture(scope="module")
def endpoint(envhub: Envhub) -> dict[str, Any]:
    return envhub.running("template:count")


def start_run(envhub: Envhub, endpoint: dict[str, Any], harness: str, preset: str = "scripted") -> dict[str, Any]:
    body = {"endpoint": endpoint["id"], "preset": preset, "harness": harness}
    response = envhub.http.post("/api/agent-runs", json=body)
    assert response.status_code == 201, response.text
    started: dict[str, Any] = response.json()
    return started


def harness_run(started: dict[str, Any]) -> HarnessRun:
    """The CLI pointed at the model door and the MCP door as the run's start says (the seed resets the episode)."""
    return HarnessRun(
        model_url=started["anthropic_base_url"],  # {base}/model; the OpenAI-dialect CLIs are given {base}/model/v1
        credential=started["credential"],
        model="scripted-model",
        mcp_name="envhub",
        mcp_url=started["mcp_url"] + "?seed=7",
        mcp_headers=started["headers"],
        tools=(TOOL, "state"),
        prompt=PROMPT,
    )


def environments(tool: str) -> bool:
    """Whether an offered tool is the environment's step, under the CLI's naming (mcp__envhub__step, envhub_step)."""
    return tool.startswith(("mcp__envhub", "envhub")) and tool.endswith(TOOL)


def held(envhub: Envhub, endpoint: dict[str, Any]) -> int:
    sessions: int = envhub.endpoint(endpoint["id"])["pool"]["sessions"]
    return sessions


def door_episodes(envhub: Envhub, endpoint: dict[str, Any], run_id: str) -> list[dict[str, Any]]:
    """The episodes the door recorded for the run's agent sessions, read as the API gives them."""
    sessions = envhub.http.get(f"/api/endpoints/{endpoint['id']}/sessions").json()["data"]
    episodes = []
    for session in [s for s in sessions if s["run"] == run_id]:
        episodes += envhub.http.get(f"/api/endpoints/{endpoint['id']}/sessions/{session['id']}").json()["episodes"]
    return episodes


@pytest.mark.parametrize("name", [pytest.param(name, marks=needs_harness(name)) for name in HARNESSES])
def test_a_harness_cli_s_run_through_envhub_records_its_model_calls_and_its_episode_with_the_reward(
    envhub: Envhub, endpoint: dict[str, Any], scripted: ScriptedModel, harness_cli: Any, name: str, tmp_path: Path
) -> None:
    harness_cli(name)
    started = start_run(envhub, endpoint, name)
    run_id = started["run"]["id"]
    outcome = run_headless(
        HARNESSES[name], harness_run(started), cache_dir=HARNESS_DIR, wall_s=120, scratch_dir=tmp_path
    )
    assert (outcome.exit_status, outcome.code) == (0, ""), outcome.stderr_tail + outcome.stdout_tail
    ended = envhub.http.post(f"/api/agent-runs/{run_id}/end")
    assert ended.status_code == 200
    assert ended.json()["reward"] == 1.0  # settled from its door episode
    assert held(envhub, endpoint) == 0  # its session's slot is back

    # Its model calls, as the harness sent them through the door: the CLI's own system prompt and its tools, the
    # environment's among them; the preset's key never reaches the record.
    record = envhub.http.get(f"/api/agent-runs/{run_id}").json()
    calls = record["calls"]
    assert calls and all(call["status"] == 200 for call in calls)
    assert {call["dialect"] for call in calls} == {HARNESSES[name].dialect}
    asked = [a for a in (ask_of(c["dialect"], c["request"]) for c in calls) if any(map(environments, a.tools))]
    assert asked, [call["request"].get("tools") for call in calls]
    assert len(asked[0].system) > 1000  # the harness's own system prompt
    assert not all(environments(tool) for tool in asked[0].tools)  # the harness's own tools beside the environment's
    assert [json.loads(c["arguments"]) for call in calls for c in call["tool_calls"]] == [{"add": 10}]
    assert KEY not in json.dumps(record)
    # The scripted model got the preset's key, never the run's credential.
    assert all(
        KEY in seen.headers.get("authorization", "") + seen.headers.get("x-api-key", "") for seen in scripted.seen
    )

    # The door's side of the run: the tool call and its reward.
    [episode] = [e for e in door_episodes(envhub, endpoint, run_id) if e["steps"] > 0]
    assert (episode["status"], episode["reward"]) == ("done", 1.0)
    steps = [r for r in episode["records"] if r["kind"] == "step"]
    assert [(step["tool"], step["arguments"]) for step in steps] == [(TOOL, {"add": 10})]

    # The SFT export: JSON rows of messages and tools, one of them offering the environment's tool.
    exported = envhub.http.get(f"/api/agent-runs/{run_id}/sft.jsonl", headers=ADMIN)
    assert exported.status_code == 200, exported.text
    rows = [json.loads(line) for line in exported.text.splitlines()]
    assert rows and all(row["messages"] and isinstance(row["tools"], list) for row in rows)
    played = [row for row in rows if not row["side"]]
    assert played and any(environments(tool["function"]["name"]) for tool in played[0]["tools"])


def evaluate(envhub: Envhub, endpoint: dict[str, Any], **body: Any) -> dict[str, Any]:
    response = envhub.http.post("/api/evaluations", json={"endpoint": endpoint["id"], **body})
    assert response.status_code == 201, response.text
    run_id = response.json()["id"]
    wait_until(lambda: envhub.http.get(f"/api/evaluations/{run_id}").json()["status"] not in ("queued", "running"), 900)
    run: dict[str, Any] = envhub.http.get(f"/api/evaluations/{run_id}").json()
    return run


def records_of(envhub: Envhub, episode_id: str) -> list[dict[str, Any]]:
    answer = envhub.http.get(f"/api/evaluations/episodes/{episode_id}")
    assert answer.status_code == 200, answer.text
    records: list[dict[str, Any]] = answer.json()["records"]
    return records


@needs_harness("claude-code")
def test_twenty_claude_code_episodes_as_a_job_on_a_one_slot_server_finish_and_leave_no_session_held(
    envhub: Envhub, harness_cli: Any
) -> None:
    harness_cli("claude-code")
    one_slot = envhub.running("template:count", options=ONE_SLOT)
    began = utcnow()
    run = evaluate(
        envhub, one_slot, policy={"harness": "claude-code", "preset": "scripted"}, episodes=20, concurrency=1
    )
    assert run["status"] == "finished", run["message"]
    assert run["policy"] == {
        "kind": "harness",
        "harness": "claude-code",
        "version": HARNESSES["claude-code"].version,
        "model": "scripted-model",
        "preset": "scripted",
    }
    episodes = run["episodes"]
    assert [(e["status"], e["reward"], e["steps"]) for e in episodes] == [("done", 1.0, 1)] * 20
    runs = [r for r in envhub.http.get("/api/agent-runs").json() if r["endpoint"] == one_slot["id"]]
    assert len(runs) == 20
    assert {(r["harness"], r["status"], r["reward"]) for r in runs} == {("claude-code", "finished", 1.0)}
    assert all(r["calls"] > 0 for r in runs)
    assert held(envhub, one_slot) == 0  # Claude Code never closes its MCP session: the run's end did
    [pointer] = [r for r in records_of(envhub, episodes[0]["id"]) if r["kind"] == "agent_run"]
    assert pointer["run"] in {r["id"] for r in runs} and pointer["code"] == ""

    board = envhub.http.get(f"/api/environments/{one_slot['environment']}/leaderboard").json()
    rows = [row for group in board["groups"] for row in group["rows"] if row["evaluation"] == run["id"]]
    assert [(row["policy"], row["mean_reward"], row["episodes"]) for row in rows] == [
        ("claude-code · scripted-model", 1.0, 20)
    ]
    print(f"20 Claude Code episodes as a job: {(utcnow() - began).total_seconds():.0f} s")


def stalls_after_its_first_step(ask: Ask) -> Turn:
    """Adds 3 (the episode goes on), then never answers again."""
    tool = next((name for name in ask.tools if environments(name)), None)
    if tool is None:
        return Turn(text="A short answer.")
    if ask.tool_results:
        return Turn(text="late", delay_s=600)
    return Turn(tool_calls=[(tool, {"add": 3})])


@needs_harness("qwen-code")
def test_a_harness_that_hangs_in_a_job_fails_its_episode_harness_timeout_and_keeps_what_it_recorded(
    envhub: Envhub, endpoint: dict[str, Any], harness_cli: Any
) -> None:
    harness_cli("qwen-code")
    stalling = ScriptedModel(stalls_after_its_first_step)
    try:
        body = {"base_url": stalling.url + "/v1", "model": "stalling-model", "api_key": KEY}
        assert envhub.http.put("/api/models/stalling", json=body).status_code == 200
        run = evaluate(
            envhub, endpoint, policy={"harness": "qwen-code", "preset": "stalling"}, episodes=1, episode_s=20
        )
    finally:
        stalling.close()
    assert run["status"] == "finished", run["message"]
    [episode] = run["episodes"]
    assert (episode["status"], episode["steps"]) == ("failed", 1)
    assert episode["code"] == "harness_timeout"
    records = records_of(envhub, episode["id"])
    assert [(r["tool"], r["arguments"]) for r in records if r["kind"] == "step"] == [(TOOL, {"add": 3})]
    [pointer] = [r for r in records if r["kind"] == "agent_run"]
    assert pointer["code"] == "harness_timeout"

    agent_run = envhub.http.get(f"/api/agent-runs/{pointer['run']}").json()
    assert (agent_run["run"]["status"], agent_run["run"]["code"]) == ("failed", "harness_timeout")
    assert agent_run["run"]["reward"] == 0.0  # the step it took gave 0: a reward, not none
    answered = [call for call in agent_run["calls"] if call["tool_calls"]]
    assert [json.loads(c["arguments"]) for call in answered for c in call["tool_calls"]] == [{"add": 3}]
    assert held(envhub, endpoint) == 0


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@needs_harness("qwen-code")
def test_a_harness_that_hangs_is_killed_whole_at_its_wall_time_limit(
    envhub: Envhub, endpoint: dict[str, Any], harness_cli: Any, tmp_path: Path
) -> None:
    harness_cli("qwen-code")
    stalling = ScriptedModel(lambda ask: Turn(text="late", delay_s=600))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    started = start_run(envhub, endpoint, "qwen-code")
    try:
        run = replace(harness_run(started), model_url=stalling.url)  # the stalling model itself, not the door
        outcome = run_headless(HARNESSES["qwen-code"], run, cache_dir=HARNESS_DIR, wall_s=5, scratch_dir=scratch)
    finally:
        stalling.close()
        envhub.http.post(f"/api/agent-runs/{started['run']['id']}/end")
    assert (outcome.timed_out, outcome.exit_status, outcome.code) == (True, None, "harness_timeout")
    wait_until(lambda: not group_alive(outcome.pid))  # its last processes, killed, are reaped by init
    assert list(scratch.iterdir()) == []


def resets_then_adds_ten(ask: Ask) -> Turn:
    """As a model on a user's machine plays: its URL starts no episode, so it resets first."""
    tools = {suffix: next((t for t in ask.tools if t.startswith(("mcp__", "count")) and t.endswith(suffix)), None)
             for suffix in ("reset", TOOL)}  # fmt: skip
    reset, step = tools["reset"], tools[TOOL]
    if reset is None or step is None:
        return Turn(text="A short answer.")
    if any(re.search(r'"done"\s*:\s*true', result) for result in ask.tool_results):
        return Turn(text="Done.")
    return Turn(tool_calls=[(step, {"add": 10})] if ask.tool_results else [(reset, {"seed": 7})])


# Codex and Qwen Code: with a model that must reset first, Claude Code and opencode did not always end their turn
# against the scripted brain (the job's runs above cover both, their episode started by the URL).
@pytest.mark.parametrize("name", [pytest.param(name, marks=needs_harness(name)) for name in ("codex", "qwen-code")])
def test_the_connect_panel_s_script_records_a_run_of_the_harness_on_a_user_s_machine(
    envhub: Envhub, endpoint: dict[str, Any], harness_cli: Any, name: str, tmp_path: Path
) -> None:
    installed = harness_cli(name)
    [script] = [
        code for tab, code in agents(Target(endpoint["url"], "count", door=True)).items() if RECORDED.get(tab) == name
    ]
    resetting = ScriptedModel(resets_then_adds_ten)
    body = {"base_url": resetting.url + "/v1", "model": "resetting-model", "api_key": KEY}
    assert envhub.http.put("/api/models/resetting", json=body).status_code == 200
    script = script.replace('"preset": "NAME"', '"preset": "resetting"')
    home = tmp_path / "home"
    home.mkdir()
    env = scratch_env(home) | {"PATH": f"{installed.binary.parent}:{scratch_env(home)['PATH']}"}
    (home / "tmp").mkdir()
    for companion in installed.companions.values():  # opencode's plugin, which it would fetch from npm at start
        shutil.copytree(companion, home / ".config" / "opencode", symlinks=True, dirs_exist_ok=True)
    try:
        done = subprocess.run(
            ["bash", "-e", "-c", script], env=env, cwd=home, capture_output=True, text=True, timeout=60
        )
    finally:
        resetting.close()
    assert done.returncode == 0, done.stderr[-3000:]

    [run] = [r for r in envhub.http.get("/api/agent-runs").json() if r["harness"] == name][:1]
    ended = envhub.http.post(f"/api/agent-runs/{run['id']}/end").json()
    assert (ended["reward"], ended["calls"] > 0) == (1.0, True)  # its model calls and its episode, joined
