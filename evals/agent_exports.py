"""What a trainer reads from recorded agent runs: SFT rows (a conversation chain's messages and tools, as TRL's
SFTTrainer takes them) and RL rows (token ids joined across a chain's calls, with log-probs and a mask over the
model's own tokens), as JSONL and as a dataset on the Hub.

A chain is the calls whose conversations continue one another: each SFT row is a chain's last call, whose
conversation holds the earlier ones. A harness's side requests (opencode's title, a summary) are chains of their own;
they are kept, marked `side`, since they are the model's real answers too and a trainer filters them in one line;
a chain is a side one when it offered none of the environment's tools (when those are not known: no tools at all)."""

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from core.errors import ConflictError
from evals.agent_runs import AgentRuns, door_side
from evals.agent_sessions import AgentSessions
from evals.dialects import Conversation, conversation
from evals.hub_push import push_dataset
from evals.models import AgentRun, Episode, ModelCall

__all__ = [
    "RL_FILE",
    "SFT_FILE",
    "dataset_card",
    "door_episodes",
    "ensure_token_ids",
    "push_runs",
    "rl_jsonl",
    "rl_rows",
    "sft_jsonl",
    "sft_rows",
]

SFT_FILE = "data/sft.jsonl"
RL_FILE = "data/rl.jsonl"


def door_episodes(agents: AgentSessions, session_ids: Iterable[str]) -> Iterator[Episode]:
    """The episodes the door recorded for the run's agent sessions (those whose `run` is the run's id)."""
    for session_id in session_ids:
        yield from agents.episodes(session_id)


def ensure_token_ids(store: AgentRuns, run: AgentRun) -> None:
    if run.id not in store.with_token_ids([run.id]):
        raise ConflictError(
            f"agent run {run.id} recorded no token ids, so it has no RL rows: run it with a model preset whose server "
            "returns them (token_ids: true, a vLLM server), or export its SFT rows",
            code="no_token_ids",
        )


# -- SFT rows


def _canonical(arguments: Any) -> Any:
    try:
        return json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return arguments.strip()


def _key(message: dict[str, Any]) -> str:
    """What a later request must repeat of a message for it to continue the conversation: call ids and whitespace
    around text may be written anew."""
    calls = [(c["function"]["name"], _canonical(c["function"]["arguments"])) for c in message.get("tool_calls", [])]
    return json.dumps([message["role"], (message.get("content") or "").strip(), calls], sort_keys=True, default=str)


def _prefix_hashes(keys: list[str]) -> list[int]:
    hashes, running = [], 0
    for key in keys:
        running = hash((running, key))
        hashes.append(running)
    return hashes


def _template_ready(message: dict[str, Any]) -> dict[str, Any]:
    """Tool calls' arguments as objects, as chat templates render them (an OpenAI string would be quoted again)."""
    if "tool_calls" not in message:
        return message
    calls = []
    for call in message["tool_calls"]:
        arguments = _canonical(call["function"]["arguments"])
        calls.append(call | {"function": call["function"] | {"arguments": arguments}})
    return message | {"tool_calls": calls}


def _named(tool: dict[str, Any]) -> str:
    return str(tool.get("function", {}).get("name", ""))


def _is_side(tools: list[dict[str, Any]], environment_tools: set[str] | None) -> bool:
    if environment_tools is None:
        return not tools
    # Harnesses prefix MCP tools: mcp__server__tool (Claude Code, Codex, Qwen Code), server_tool (opencode).
    return not any(_named(t) == e or _named(t).endswith(("__" + e, "_" + e)) for t in tools for e in environment_tools)


def _run_fields(run: AgentRun) -> dict[str, Any]:
    return {
        "run": run.id,
        "harness": run.harness,
        "model": run.model,
        "environment": run.environment,
        "reward": run.reward,
    }


def sft_rows(run: AgentRun, calls: list[ModelCall], environment_tools: set[str] | None = None) -> list[dict[str, Any]]:
    """One row per chain: its last call's system prompt, messages, answer and tools."""
    answered = [(call, c) for call, c in ((call, conversation(call)) for call in calls) if c.answer is not None]
    prompts = [_prefix_hashes([_key(m) for m in c.chat()[:-1]]) for _, c in answered]
    full = [hash((p[-1] if p else 0, _key(c.chat()[-1]))) for p, (_, c) in zip(prompts, answered, strict=True)]
    rows: list[dict[str, Any]] = []
    later: set[int] = set()  # every prefix of the prompts of the calls after this one
    for n in reversed(range(len(answered))):
        call, c = answered[n]
        if full[n] not in later:  # no later call carries this conversation on: a chain ends here
            within = set(prompts[n])
            chain = [answered[k][0].index for k in range(n) if full[k] in within] + [call.index]
            rows.append(_sft_row(run, c, chain, _is_side(c.tools, environment_tools)))
        later.update(prompts[n])
    return rows[::-1]


def _sft_row(run: AgentRun, c: Conversation, chain: list[int], side: bool) -> dict[str, Any]:
    row = {"messages": [_template_ready(m) for m in c.chat()], "tools": c.tools, **_run_fields(run)}
    return row | {"side": side, "calls": chain, "unread": c.unread}


# -- RL rows


@dataclass
class _Sequence:
    """A chain's tokens so far: the first prompt, then everything after it."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)

    def continued_by(self, prompt: list[int]) -> bool:
        n = len(self.prompt_ids)
        return (
            len(prompt) >= self.length
            and prompt[:n] == self.prompt_ids
            and prompt[n : self.length] == (self.completion_ids)
        )

    def add(self, between: list[int], completion: list[int], logprobs: list[float], index: int) -> None:
        """The tokens the next prompt put in between (tool results, the template) are not the model's: masked."""
        self.completion_ids += between + completion
        self.logprobs += [0.0] * len(between) + logprobs
        self.mask += [0] * len(between) + [1] * len(completion)
        self.calls.append(index)


def _token_ids(call: ModelCall) -> tuple[list[int], list[int], list[float]] | None:
    prompt, completion, logprobs = call.prompt_token_ids, call.completion_token_ids, call.completion_logprobs
    if not prompt or completion is None or logprobs is None or len(logprobs) != len(completion):
        return None
    return prompt, completion, [float(x) for x in logprobs]


def rl_rows(run: AgentRun, calls: list[ModelCall]) -> Iterator[dict[str, Any]]:
    """The calls with token ids, joined where a call's prompt starts with an earlier one's prompt and completion (the
    longest such); a call that continues none starts a row of its own."""
    sequences: list[_Sequence] = []
    for call in calls:
        ids = _token_ids(call)
        if ids is None:
            continue
        prompt, completion, logprobs = ids
        earlier = [s for s in sequences if s.continued_by(prompt)]
        if earlier:
            joined = max(earlier, key=lambda s: s.length)
            joined.add(prompt[joined.length :], completion, logprobs, call.index)
        else:
            sequences.append(_Sequence(prompt, list(completion), logprobs, [1] * len(completion), [call.index]))
    for s in sequences:
        yield {
            "prompt_ids": s.prompt_ids,
            "completion_ids": s.completion_ids,
            "logprobs": s.logprobs,
            "completion_mask": s.mask,
            **_run_fields(run),
            "calls": s.calls,
        }


# -- JSONL and the Hub


def _lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    for row in rows:
        yield json.dumps(row, ensure_ascii=False, default=str) + "\n"


def sft_jsonl(store: AgentRuns, runs: Iterable[AgentRun]) -> Iterator[str]:
    """The runs' SFT rows, a run's calls read at a time."""
    for run in runs:
        environment_tools = door_side(store.engine, run.id).tools or None  # none known without a door session
        yield from _lines(sft_rows(run, store.calls(run.id), environment_tools))


def rl_jsonl(store: AgentRuns, runs: Iterable[AgentRun]) -> Iterator[str]:
    for run in runs:
        yield from _lines(rl_rows(run, store.calls(run.id)))


def dataset_card(runs: list[AgentRun], with_rl: bool) -> str:
    configs = [f"  - config_name: sft\n    data_files: {SFT_FILE}"]
    configs += [f"  - config_name: rl\n    data_files: {RL_FILE}"] if with_rl else []
    front = "---\ntags:\n  - openenv\n  - agent-runs\n  - sft\nconfigs:\n" + "\n".join(configs) + "\n---"
    harnesses = ", ".join(sorted({f"`{r.harness}`" for r in runs})) or "none"
    models = ", ".join(sorted({f"`{r.model}`" for r in runs})) or "none"
    environments = ", ".join(sorted({f"`{r.environment}`" for r in runs})) or "none"
    rewarded = [r.reward for r in runs if r.reward is not None]
    mean = f"{sum(rewarded) / len(rewarded):.3f} over {len(rewarded)}" if rewarded else "no reward given"
    rl = (
        f"`{RL_FILE}` (config `rl`): token ids joined across a chain's calls: `prompt_ids`, `completion_ids`, "
        "`logprobs` and `completion_mask` (1 over the model's own tokens, 0 over tool results and the template).\n"
        if with_rl
        else "No run recorded token ids, so there are no RL rows.\n"
    )
    return (
        f"{front}\n\n# Agent runs on {environments}\n\n"
        f"Model calls recorded by envhub's model door while agent harnesses played, {len(runs)} run(s).\n\n"
        f"`{SFT_FILE}` (config `sft`): one conversation chain per line, its `messages` and `tools` as TRL's "
        "SFTTrainer reads them; `side` marks a harness's side requests (a title, a summary). "
        f"{rl}\n"
        "| | |\n|---|---|\n"
        f"| runs | {', '.join(f'`{r.id}`' for r in runs)} |\n"
        f"| harnesses | {harnesses} |\n| models | {models} |\n| environments | {environments} |\n"
        f"| reward | {mean} (null where none was given, not 0) |\n"
    )


def push_runs(
    store: AgentRuns, runs: list[AgentRun], repo_id: str, *, token: str | None, endpoint: str, private: bool
) -> str:
    """Push the runs' SFT rows, and their RL rows where any recorded token ids, with a card; the repo's URL."""
    with_rl = bool(store.with_token_ids(r.id for r in runs))
    files = {SFT_FILE: sft_jsonl(store, runs)} | ({RL_FILE: rl_jsonl(store, runs)} if with_rl else {})
    card = dataset_card(runs, with_rl)
    message = f"Agent runs recorded by envhub ({len(runs)})"
    return push_dataset(repo_id, files, card, token=token, endpoint=endpoint, private=private, message=message)
