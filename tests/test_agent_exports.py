"""Recorded agent runs as training data: model calls in each dialect as the harnesses send them read into SFT rows
that TRL's own preprocessing takes, RL rows of token ids joined across calls, their exports and pushes, and the run
page."""

import json
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from app.settings import Settings
from app.ui.agent_run import run_html
from core.clock import utcnow
from evals.dialects import conversation
from evals.models import AgentRun, Episode, ModelCall
from tests.conftest import needs_trainer
from tests.fakehub import FakeHub
from tests.serving import Envhub

ALICE = {"Authorization": "Bearer hf_test"}
BOB = {"Authorization": "Bearer hf_bob"}
GUESS_SCHEMA = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}
FEEDBACK = '{"feedback": "C R A N E", "reward": 1.0}'
CLAUDE_SYSTEM = "You are Claude Code, Anthropic's official CLI for Claude.\n" + "Use the tools. " * 800
CODEX_SYSTEM = "You are Codex, a coding agent based on GPT-5.\n" + "Be concise. " * 800
OPENCODE_SYSTEM = "You are opencode, an interactive CLI tool.\n" + "Keep going. " * 800


def call(
    run: str, index: int, dialect: str, request: dict[str, Any], response: dict[str, Any], **more: Any
) -> ModelCall:
    return ModelCall(
        id=f"{run}-{index}", run=run, index=index, dialect=dialect, stream=True, status=200, request=request,
        response=response, usage={"input_tokens": 100 + index, "output_tokens": 7}, **more,
    )  # fmt: skip


def claude_code(run: str) -> list[ModelCall]:
    """Anthropic Messages as Claude Code sends them: system blocks with cache control, reminders, thinking."""
    system = [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.328"},
        {"type": "text", "text": CLAUDE_SYSTEM, "cache_control": {"type": "ephemeral"}},
    ]
    tools = [
        {"name": "Bash", "description": "Run a command", "input_schema": {"type": "object", "properties": {}}},
        {"name": "mcp__envhub__guess", "description": "Guess a five-letter word", "input_schema": GUESS_SCHEMA},
    ]
    user = {"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>Tools are deferred.</system-reminder>"},
        {"type": "text", "text": "Play wordle.", "cache_control": {"type": "ephemeral"}},
    ]}  # fmt: skip
    use = {"type": "tool_use", "id": "toolu_01", "name": "mcp__envhub__guess", "input": {"word": "crane"}}
    thinking = {"type": "thinking", "thinking": "A common opener.", "signature": "c2ln"}
    first = {"role": "assistant", "content": [thinking, {"type": "text", "text": "Guessing."}, use]}
    result = {"type": "tool_result", "tool_use_id": "toolu_01", "content": [{"type": "text", "text": FEEDBACK}]}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": True, "system": system, "tools": tools}
    return [
        call(run, 0, "messages", body | {"messages": [user]}, {"type": "message", "content": first["content"]}),
        call(
            run, 1, "messages", body | {"messages": [user, first, {"role": "user", "content": [result]}]},
            {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "Solved: crane."}]},
        ),
    ]  # fmt: skip


def codex(run: str) -> list[ModelCall]:
    """OpenAI Responses as Codex sends them: instructions, a developer message, the MCP tools in a namespace."""
    tools = [
        {"type": "function", "name": "shell", "description": "Runs a command", "strict": False,
         "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}}}},
        {"type": "namespace", "name": "mcp__envhub__", "description": "Tools of the envhub MCP server",
         "tools": [{"type": "function", "name": "guess", "description": "Guess a five-letter word", "strict": False,
                    "parameters": GUESS_SCHEMA}]},
    ]  # fmt: skip
    start = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>never"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Play wordle."}]},
    ]
    fc = {"type": "function_call", "name": "guess", "namespace": "mcp__envhub__", "arguments": '{"word":"crane"}',
          "call_id": "call_1"}  # fmt: skip
    reasoning = {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}
    body = {"model": "gpt-5-codex", "instructions": CODEX_SYSTEM, "tools": tools, "stream": True, "store": False}
    later = [*start, reasoning, fc, {"type": "function_call_output", "call_id": "call_1", "output": FEEDBACK}]
    done = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Solved: crane."}]}
    return [
        call(run, 0, "responses", body | {"input": start}, {"output": [reasoning, fc]}),
        call(run, 1, "responses", body | {"input": later}, {"output": [done]}),
    ]


def enc(text: str) -> list[int]:
    """A byte tokenizer that keeps prefixes, as the scripted model server's: a later prompt starts with an earlier
    prompt and its completion."""
    return list(text.encode())


def logprobs(ids: list[int]) -> list[float]:
    return [-(i % 7) / 10 for i in range(len(ids))]


def opencode(run: str) -> list[ModelCall]:
    """OpenAI Chat Completions as opencode sends them (a title request first, with no tools), from a vLLM server
    that returns token ids and log-probs."""
    tools = [
        {"type": "function", "function": {"name": "bash", "description": "Run", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "envhub_guess", "description": "Guess a five-letter word",
                                          "parameters": GUESS_SCHEMA}},
    ]  # fmt: skip
    title = {"messages": [{"role": "system", "content": "You are a title generator."},
                          {"role": "user", "content": "Play wordle."}]}  # fmt: skip
    start = [{"role": "system", "content": OPENCODE_SYSTEM}, {"role": "user", "content": [
        {"type": "text", "text": "Play wordle."}]}]  # fmt: skip
    tool_call = {
        "id": "call_a",
        "type": "function",
        "function": {"name": "envhub_guess", "arguments": '{"word": "crane"}'},
    }
    asked = {"role": "assistant", "content": "", "tool_calls": [tool_call]}
    later = [*start, asked, {"role": "tool", "tool_call_id": "call_a", "content": FEEDBACK}]

    def answer(text: str, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        message = {"role": "assistant", "content": text} | ({"tool_calls": calls} if calls else {})
        return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}]}

    p0, c0 = enc("<s>title</s><u>Play wordle.</u><a>"), enc("Wordle</a>")
    p1, c1 = enc("<s>opencode</s><u>Play wordle.</u><a>"), enc('<tool_call>{"word": "crane"}</tool_call></a>')
    between = enc(f"<tool>{FEEDBACK}</tool><a>")
    p2, c2 = p1 + c1 + between, enc("Solved: crane.</a>")
    ids = [{"prompt_token_ids": p, "completion_token_ids": c, "completion_logprobs": logprobs(c)}
           for p, c in ((p0, c0), (p1, c1), (p2, c2))]  # fmt: skip
    return [
        call(run, 0, "chat", title, answer("Wordle"), **ids[0]),
        call(run, 1, "chat", {"messages": start, "tools": tools}, answer("", [tool_call]), **ids[1]),
        call(run, 2, "chat", {"messages": later, "tools": tools}, answer("Solved: crane."), **ids[2]),
    ]


def agent_run(run_id: str, harness: str, owner: str | None, reward: float | None, calls: int) -> AgentRun:
    return AgentRun(
        id=run_id, owner=owner, endpoint="ep-1", environment="template:wordle", harness=harness, preset="mine",
        model="m-1", status="finished", expires_at=utcnow() + timedelta(hours=1), reward=reward, calls=calls,
        credential_hash="0" * 64,
    )  # fmt: skip


RUNS = {"ar-claude00001": claude_code, "ar-codex000001": codex, "ar-opencode0001": opencode}
HARNESSES = {"ar-claude00001": "claude-code", "ar-codex000001": "codex", "ar-opencode0001": "opencode"}


@pytest.fixture
def recorded(settings: Settings, hub: FakeHub, tmp_path: Path) -> Iterator[Envhub]:
    """A real envhub whose database holds three runs of alice's, written as the model door writes them."""
    hub.users["hf_bob"] = "bob"
    server = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data"}))
    with Session(server.services.engine) as session:
        for n, (run_id, calls) in enumerate(RUNS.items()):
            made = calls(run_id)
            reward = [1.0, None, 0.0][n]
            session.add(agent_run(run_id, HARNESSES[run_id], "alice", reward, len(made)))
            session.add_all(made)
        session.commit()
    yield server
    server.stop()


def rows(envhub: Envhub, path: str, headers: dict[str, str] = ALICE) -> list[dict[str, Any]]:
    response = envhub.http.get(path, headers=headers)
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines()]


def test_each_dialect_reads_into_one_conversation() -> None:
    claude = conversation(claude_code("ar-x")[1])
    assert claude.system is not None and claude.system.endswith(CLAUDE_SYSTEM) and "cache_control" not in claude.system
    assert [m["role"] for m in claude.chat()] == ["system", "user", "assistant", "tool", "assistant"]
    asked = claude.messages[1]
    assert asked["content"] == "Guessing." and "A common opener" not in json.dumps(claude.messages)  # thinking left
    function = {"name": "mcp__envhub__guess", "arguments": '{"word": "crane"}'}
    assert asked["tool_calls"] == [{"id": "toolu_01", "type": "function", "function": function}]
    assert claude.messages[2] == {"role": "tool", "tool_call_id": "toolu_01", "content": FEEDBACK}
    assert claude.tools[1] == {"type": "function", "function": {"name": "mcp__envhub__guess",
                               "description": "Guess a five-letter word", "parameters": GUESS_SCHEMA}}  # fmt: skip
    assert claude.answer == {"role": "assistant", "content": "Solved: crane."} and claude.unread == []

    first = conversation(codex("ar-x")[0])
    assert first.system == CODEX_SYSTEM + "\n\n<permissions>never"
    assert [t["function"]["name"] for t in first.tools] == ["shell", "mcp__envhub__guess"]  # as the model calls it
    assert first.answer is not None and first.answer["tool_calls"][0]["function"]["name"] == "mcp__envhub__guess"
    later = conversation(codex("ar-x")[1])
    assert [m["role"] for m in later.messages] == ["user", "assistant", "tool"] and later.unread == []

    broken = ModelCall(id="ar-x-9", run="ar-x", index=9, dialect="messages", status=200, request={
        "system": 7, "messages": ["what", {"role": "user", "content": [{"type": "image", "source": {}}]}],
        "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, response={"content": "oops"})  # fmt: skip
    read = conversation(broken)  # never raises: what it could not read is kept as text and said
    assert read.unread and len(read.unread) == 4 and read.answer == {"role": "assistant", "content": ""}
    assert conversation(ModelCall(id="x", run="x", index=0, dialect="grpc", status=200, request={"a": 1})).unread


def test_sft_rows_carry_the_harness_prompt_and_tools_and_mark_side_requests(recorded: Envhub) -> None:
    claude = rows(recorded, "/api/agent-runs/ar-claude00001/sft.jsonl")
    assert len(claude) == 1 and claude[0]["calls"] == [0, 1] and claude[0]["side"] is False
    assert claude[0]["messages"][0]["role"] == "system" and CLAUDE_SYSTEM in claude[0]["messages"][0]["content"]
    assert claude[0]["messages"][-1] == {"role": "assistant", "content": "Solved: crane."}
    assert claude[0]["messages"][2]["tool_calls"][0]["function"]["arguments"] == {"word": "crane"}
    assert [t["function"]["name"] for t in claude[0]["tools"]] == ["Bash", "mcp__envhub__guess"]
    assert (claude[0]["run"], claude[0]["harness"], claude[0]["reward"]) == ("ar-claude00001", "claude-code", 1.0)

    codex_rows = rows(recorded, "/api/agent-runs/ar-codex000001/sft.jsonl")
    assert len(codex_rows) == 1 and codex_rows[0]["reward"] is None  # no reward stays null, not 0

    title, main = rows(recorded, "/api/agent-runs/ar-opencode0001/sft.jsonl")
    assert (title["side"], title["calls"], title["tools"]) == (True, [0], [])
    assert (main["side"], main["calls"], main["reward"]) == (False, [1, 2], 0.0)
    assert main["messages"][0]["content"] == OPENCODE_SYSTEM

    every = rows(recorded, "/api/agent-runs/sft.jsonl?harness=codex")
    assert [r["run"] for r in every] == ["ar-codex000001"]
    assert len(rows(recorded, "/api/agent-runs/sft.jsonl?endpoint=ep-1")) == 4


def test_rl_rows_join_token_ids_across_calls_and_mask_tool_results(recorded: Envhub) -> None:
    title, main = rows(recorded, "/api/agent-runs/ar-opencode0001/rl.jsonl")
    calls = {c.index: c for c in opencode("ar-x")}
    assert title["calls"] == [0] and title["completion_mask"] == [1] * len(calls[0].completion_token_ids or [])
    first, second = calls[1], calls[2]
    assert first.prompt_token_ids and first.completion_token_ids and second.completion_token_ids
    assert first.completion_logprobs and second.completion_logprobs
    between = enc(f"<tool>{FEEDBACK}</tool><a>")
    assert main["calls"] == [1, 2] and main["prompt_ids"] == first.prompt_token_ids
    assert main["completion_ids"] == first.completion_token_ids + between + second.completion_token_ids
    ones_first, ones_second = [1] * len(first.completion_token_ids), [1] * len(second.completion_token_ids)
    assert main["completion_mask"] == ones_first + [0] * len(between) + ones_second
    assert main["logprobs"] == first.completion_logprobs + [0.0] * len(between) + second.completion_logprobs
    assert main["reward"] == 0.0 and main["run"] == "ar-opencode0001"

    none = recorded.http.get("/api/agent-runs/ar-claude00001/rl.jsonl", headers=ALICE)
    assert none.status_code == 409 and none.json()["code"] == "no_token_ids"
    several = recorded.http.get("/api/agent-runs/rl.jsonl", headers=ALICE)
    assert several.status_code == 200 and several.headers["x-envhub-runs-skipped"] == "2"
    assert {json.loads(line)["run"] for line in several.text.splitlines()} == {"ar-opencode0001"}


def test_a_run_is_its_owners_only(recorded: Envhub) -> None:
    for path in ("sft.jsonl", "rl.jsonl"):
        stranger = recorded.http.get(f"/api/agent-runs/ar-opencode0001/{path}", headers=BOB)
        assert stranger.status_code == 404 and stranger.json()["code"] == "agent_run_not_found"
    assert recorded.http.get("/api/agent-runs/sft.jsonl", headers=BOB).text == ""
    pushed = recorded.http.post("/api/agent-runs/ar-opencode0001/push", json={"repo": "bob/runs"}, headers=BOB)
    assert pushed.status_code == 404


def test_runs_are_pushed_to_a_hub_dataset_with_a_card(recorded: Envhub, hub: FakeHub) -> None:
    anonymous = recorded.http.post("/api/agent-runs/ar-opencode0001/push", json={"repo": "alice/runs"})
    assert anonymous.status_code == 404  # alice's run: to nobody in particular it does not exist
    pushed = recorded.http.post("/api/agent-runs/ar-opencode0001/push", json={"repo": "alice/runs"}, headers=ALICE)
    assert pushed.status_code == 200, pushed.text
    files = hub.files("alice/runs", repo_type="dataset")
    sft = [json.loads(line) for line in files["data/sft.jsonl"].decode().splitlines()]
    rl = [json.loads(line) for line in files["data/rl.jsonl"].decode().splitlines()]
    assert [r["calls"] for r in sft] == [[0], [1, 2]] and [r["calls"] for r in rl] == [[0], [1, 2]]
    card = files["README.md"].decode()
    assert "config_name: sft\n    data_files: data/sft.jsonl" in card and "config_name: rl" in card
    assert "ar-opencode0001" in card and "`opencode`" in card

    everything = recorded.http.post(
        "/api/agent-runs/push?harness=claude-code", json={"repo": "alice/cc"}, headers=ALICE
    )
    assert everything.status_code == 200, everything.text
    files = hub.files("alice/cc", repo_type="dataset")
    assert "data/rl.jsonl" not in files and "config_name: rl" not in files["README.md"].decode()
    elsewhere = recorded.http.post("/api/agent-runs/push", json={"repo": "bob/cc"}, headers=ALICE)
    assert elsewhere.status_code == 403


def test_the_run_page_shows_model_calls_beside_the_door_steps() -> None:
    run = agent_run("ar-page0000001", "opencode", "alice", None, 3)
    records = [{"index": 0, "tool": "guess", "arguments": {"word": "crane"}, "observation": {"feedback": "C R A N E"},
                "reward": 0.0, "done": True}]  # fmt: skip
    episode = Episode(id="as-1-0", evaluation="as-1", index=0, status="done", reward=0.0, steps=1, invalid=0,
                      tokens=0, wall_s=0.1, records=records)  # fmt: skip
    page = run_html(run, opencode(run.id), [episode])
    calls, steps = page.split('class="agent-steps"')
    assert "call 0" in calls and "call 2" in calls and "envhub_guess" in calls and "Solved: crane." in calls
    assert "token ids" in calls and "log-probs 0.000, -0.100" in calls
    assert "as-1-0" in steps and "C R A N E" in steps and "reward 0 " in steps
    assert "reward <b>no reward</b>" in page  # not 0
    assert "No door episode" in run_html(run, [], [])


TRL_READS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from examples import tiny_model
from datasets import load_dataset
from transformers import AutoTokenizer
from trl import SFTConfig, SFTTrainer
model = tiny_model.build(__import__("pathlib").Path(sys.argv[3]))
tokenizer = AutoTokenizer.from_pretrained(str(model))
dataset = load_dataset("json", data_files=sys.argv[2], split="train")
rendered = [tokenizer.apply_chat_template(r["messages"], tools=r["tools"] or None, tokenize=False) for r in dataset]
args = SFTConfig(output_dir=sys.argv[3] + "/out", max_steps=1, per_device_train_batch_size=2, use_cpu=True,
                 bf16=False, report_to=[], max_length=64, save_strategy="no")
trainer = SFTTrainer(model=str(model), args=args, train_dataset=dataset, processing_class=tokenizer)
trainer.train()
print(json.dumps({"rendered": rendered, "rows": len(trainer.train_dataset)}))
"""


@needs_trainer
def test_sft_rows_go_through_trls_own_preprocessing(recorded: Envhub, trainer_python: Path, tmp_path: Path) -> None:
    data = tmp_path / "sft.jsonl"
    data.write_text(recorded.http.get("/api/agent-runs/sft.jsonl", headers=ALICE).text)
    root = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run(
        [str(trainer_python), "-c", TRL_READS, root, str(data), str(tmp_path)],
        capture_output=True, text=True, timeout=600, env={"TRL_EXPERIMENTAL_SILENCE": "1", "HF_HUB_OFFLINE": "1",
                                                         "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["rows"] == 4
    claude, codex_text, title, main = out["rendered"]
    assert CLAUDE_SYSTEM in claude and '"name": "mcp__envhub__guess"' in claude  # the harness's own prompt and tools
    assert '<tool_call>\n{"name": "mcp__envhub__guess", "arguments": {"word": "crane"}}' in codex_text
    assert f"<tool_response>\n{FEEDBACK}\n</tool_response>" in main and '"name": "envhub_guess"' in main
    assert "<tools>" not in title
