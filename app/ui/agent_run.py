"""The agent run page: a harness's model calls beside the door's steps (what the model was asked last, what it
answered and called; each tool call's observation and reward), the tokens and the run's reward. It opens from its
link, /?agent_run=ID, for the run's owner and the admin."""

import html
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from app.ui.requests import Visitors
from core.callers import Access
from core.errors import EnvhubError
from evals.agent_exports import door_episodes
from evals.agent_runs import AgentRuns as RunStore
from evals.agent_sessions import AgentSessions
from evals.dialects import conversation
from evals.models import AgentRun, Episode, ModelCall

__all__ = ["AgentRunPanel", "AgentRuns", "build", "run_html"]

SHOWN_CHARS = 600  # of a message, an answer or an observation; the exports have them whole
SHOWN_LOGPROBS = 5


@dataclass(frozen=True)
class AgentRunPanel:
    run_id: gr.Textbox
    show: gr.Button
    view: gr.HTML


@dataclass(frozen=True)
class AgentRuns:
    """Where the page reads a run from, for whoever looks."""

    store: RunStore
    agents: AgentSessions
    access: Access
    visitors: Visitors
    sessions_of: Callable[[str], list[str]]  # the run's agent sessions on the door: those whose `run` is its id

    def view(self, request: gr.Request | None, run_id: str) -> str:
        try:
            run = self.store.visible(self.access, self.visitors.caller(request), run_id.strip())
        except EnvhubError as exc:
            return f"<p>{html.escape(exc.message)}</p>"
        episodes = list(door_episodes(self.agents, self.sessions_of(run.id)))
        return run_html(run, self.store.calls(run.id), episodes)


def build() -> AgentRunPanel:
    with gr.Row():
        run_id = gr.Textbox(label="Agent run", placeholder="ar-…", elem_id="agent-run-id", scale=3)
        show = gr.Button("Show", elem_id="agent-run-show", scale=1)
    return AgentRunPanel(run_id, show, gr.HTML(elem_id="agent-run-view"))


def wire(runs: AgentRuns, panel: AgentRunPanel) -> None:
    panel.show.click(runs.view, [panel.run_id], [panel.view], show_progress="minimal")
    panel.run_id.submit(runs.view, [panel.run_id], [panel.view], show_progress="minimal")


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"
    return html.escape(text)


def _reward(reward: float | None) -> str:
    return "no reward" if reward is None else f"{reward:g}"


def _tokens(call: ModelCall) -> str:
    usage = call.usage or {}
    parts = [f"{usage.get('input_tokens', '–')} in · {usage.get('output_tokens', '–')} out"]
    if call.completion_token_ids is not None:
        parts.append(f"{len(call.prompt_token_ids or [])} + {len(call.completion_token_ids)} token ids")
    if call.completion_logprobs:
        shown = ", ".join(f"{p:.3f}" for p in call.completion_logprobs[:SHOWN_LOGPROBS])
        parts.append(f"log-probs {shown}{'…' if len(call.completion_logprobs) > SHOWN_LOGPROBS else ''}")
    return " · ".join(parts)


def _call_html(call: ModelCall) -> str:
    c = conversation(call)
    asked = c.messages[-1] if c.messages else {"role": "user", "content": ""}
    answer = c.answer or {}
    calls = "".join(
        f"<li><code>{html.escape(t['function']['name'])}</code> {_short(t['function']['arguments'])}</li>"
        for t in answer.get("tool_calls", [])
    )
    failed = f" · <b>HTTP {call.status}</b> {html.escape(call.code)}" if not 200 <= call.status < 300 else ""
    return (
        f'<div class="agent-call"><p><b>call {call.index}</b> · {html.escape(call.dialect)} · {call.wall_s:.2f} s'
        f"{failed}</p>"
        f"<p>asked ({html.escape(str(asked.get('role')))}): {_short(asked.get('content') or '')}</p>"
        f"<p>answered: {_short(answer.get('content') or '')}</p>"
        + (f"<ul>{calls}</ul>" if calls else "")
        + f'<p class="muted">{_tokens(call)}</p></div>'
    )


def _step_html(episode: Episode, record: dict[str, Any]) -> str:
    tool = record.get("tool")
    head = f"<code>{html.escape(str(tool))}</code> {_short(record.get('arguments'))}" if tool else "reset"
    refused = f" · refused: {_short(record['refused'])}" if record.get("refused") else ""
    return (
        f'<div class="agent-step"><p><b>{html.escape(episode.id)}</b> · {head}</p>'
        f"<p>observation: {_short(record.get('observation'))}</p>"
        f"<p>reward {_reward(record.get('reward'))} · done {bool(record.get('done'))}{refused}</p></div>"
    )


def run_html(run: AgentRun, calls: list[ModelCall], episodes: list[Episode]) -> str:
    """The run's head, then its model calls (left) beside the door's steps (right)."""
    steps = [_step_html(e, r) for e in episodes for r in e.records] or ["<p>No door episode for this run.</p>"]
    left = "".join(_call_html(c) for c in calls) or "<p>No model call recorded.</p>"
    message = f" · {html.escape(run.code)} {html.escape(run.message)}" if run.code or run.message else ""
    exports = f"/api/agent-runs/{html.escape(run.id)}"
    return (
        f'<div class="agent-run"><p><code>{html.escape(run.id)}</code> · {html.escape(run.harness)} · '
        f"{html.escape(run.model)} · {html.escape(run.environment)} · <b>{html.escape(run.status)}</b>{message}</p>"
        f"<p>reward <b>{_reward(run.reward)}</b> · {run.calls} calls · {run.input_tokens:,} input tokens · "
        f"{run.output_tokens:,} output tokens</p>"
        f'<p><a href="{exports}/sft.jsonl" download>SFT rows (JSONL)</a> · '
        f'<a href="{exports}/rl.jsonl" download>RL rows (JSONL)</a></p>'
        '<div style="display:grid;grid-template-columns:1fr 1fr;gap:1em">'
        f'<div class="agent-calls"><h4>Model calls</h4>{left}</div>'
        f'<div class="agent-steps"><h4>Door steps</h4>{"".join(steps)}</div></div></div>'
    )
