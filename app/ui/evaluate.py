"""The Evaluate tab: run a policy (a baseline, or a model on any OpenAI-compatible server, typed in or saved as a
preset) over an environment's episodes, follow it, read its results; the environment's leaderboard; and the episode
viewer, which replays any stored episode step by step and opens from its share link (/?episode=ID)."""

import asyncio
import html
import json
from typing import Any

import gradio as gr
from pydantic import ValidationError

from app.ui.charts import Bar, bars_with_intervals, histogram
from app.ui.evaluate_panel import PAUSE, PLAY, Evaluate, run_form
from app.ui.observation import observation_view, render_view
from app.ui.publish import sign_in_note
from app.ui.requests import connection_of
from app.ui.runs import Runs
from app.urls import own_gateway
from app.usecases.evaluations import EvaluationRequest, Evaluator
from app.usecases.reset_options import dataset_choice
from app.usecases.your_endpoint import running
from catalog.revisions import split_pin
from catalog.store import read_environment
from core.callers import Caller
from core.errors import EnvhubError
from evals.harnesses import HARNESSES
from evals.models import UNDER_WAY, Episode, EvaluationPublic, Leaderboard
from evals.presets import ModelPresets, preset_owner
from evals.rollouts import push_rollouts
from evals.runs import Runner
from evals.steps import EpisodeSteps
from rollout.model import ModelConfig


def _figure(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def progress_html(run: EvaluationPublic) -> str:
    s = run.summary or {}
    ci = f" ± {s['ci95']:.3f}" if s.get("ci95") is not None else ""
    return (
        f'<div class="eval-progress"><p><code>{html.escape(run.id)}</code> · {html.escape(run.policy_label)} · '
        f"<b>{html.escape(run.status.value)}</b> · {len(run.episodes)} of {run.episodes_planned} episodes</p>"
        + (f"<p>{html.escape(run.message)}</p>" if run.message else "")
        + f"<p>mean reward <b>{_figure(s.get('mean_reward'))}{ci}</b> · success {_figure(s.get('success_rate'))}"
        f" · invalid {_figure(s.get('invalid_rate'))} · {s.get('tokens', 0):,} tokens · {s.get('wall_s', 0):.1f} s</p>"
        + histogram([e.reward for e in run.episodes], "episode rewards")
        + f'<p><a href="/api/evaluations/{html.escape(run.id)}/episodes.jsonl" download>'
        "Download the rollouts (JSONL)</a></p></div>"
    )


def result_rows(run: EvaluationPublic) -> list[list[Any]]:
    return [
        [f"{run.id}-{e.index}", e.seed if e.seed is not None else json.dumps(e.task), e.status, round(e.reward, 4),
         e.steps, e.invalid, e.tokens, (e.error or "")[:200]]
        for e in run.episodes
    ]  # fmt: skip


def run_link(evaluation_id: str) -> str:
    quoted = html.escape(evaluation_id, quote=True)
    return f'<a href="?run={quoted}" data-run="{quoted}" class="run-link"><code>{html.escape(evaluation_id)}</code></a>'


def leaderboard_html(board: Leaderboard) -> str:
    if not board.groups:
        return "<p>No evaluations yet: run one above; the baselines make the floor.</p>"
    parts = [f'<div class="eval-leaderboard"><p>{html.escape(board.note)}</p>']
    for group in board.groups:
        revision = group.revision[:12] if group.revision else "the local folder"
        parts.append(f"<h4>{html.escape(group.taskset)} · revision {html.escape(revision)}</h4>")
        ranked = [Bar(r.policy, r.mean_reward, r.ci95, r.baseline) for r in group.rows if r.mean_reward is not None]
        parts.append(bars_with_intervals(ranked, f"mean reward with its 95% interval, {group.taskset}"))
        parts.append('<table class="schema">')
        parts.append("<tr><th>policy</th><th>mean reward ± 95% CI</th><th>success</th><th>episodes</th>"
                     "<th>invalid</th><th>date</th><th>run</th></tr>")  # fmt: skip
        for row in group.rows:
            ci = f" ± {row.ci95:.3f}" if row.ci95 is not None else ""
            kind = ' <span class="badge badge-idle">baseline</span>' if row.baseline else ""
            parts.append(
                f"<tr><td>{html.escape(row.policy)}{kind}</td><td>{_figure(row.mean_reward)}{ci}</td>"
                f"<td>{_figure(row.success_rate)}</td><td>{row.episodes}</td><td>{_figure(row.invalid_rate)}</td>"
                f"<td>{row.date.strftime('%Y-%m-%d')}</td><td>{run_link(row.evaluation)}</td></tr>"
            )
        parts.append("</table>")
    return "".join(parts) + "</div>"


def step_html(steps: EpisodeSteps, episode: Episode, index: int, share: str) -> str:
    """One record of an episode: what the model replied, the action sent, and what came back (read alone, with the
    first, which the observation is shown against)."""
    last = steps.count(episode) - 1
    if last < 0:
        return "<p>This episode has no steps.</p>"
    index = max(0, min(index, last))
    first, record = steps.page(episode, 0, 1)[0], steps.page(episode, index, 1)[0]
    head = (
        f'<div class="eval-step"><p><code>{html.escape(episode.id)}</code> · {html.escape(episode.status)} · '
        f"reward {episode.reward:g} · {record['kind']} {index} of {last} · "
        f'<a href="{html.escape(share)}" target="_blank">share link</a></p>'
    )
    body = ""
    for problem in record.get("problems") or []:
        body += f'<p class="eval-problem">↺ {html.escape(str(problem.get("problem")))}</p>'
    if record.get("reply"):
        body += f"<p><b>Model reply</b></p><pre>{html.escape(str(record['reply'])[:4000])}</pre>"
    if record["kind"] == "step":
        body += f"<p><b>Action</b> <code>{html.escape(json.dumps(record.get('action'), ensure_ascii=False))}</code>"
        body += f" → reward {html.escape(str(record.get('reward')))}, done {record.get('done')}</p>"
    else:
        body += f"<p><b>Reset</b> <code>{html.escape(json.dumps(record.get('options'), ensure_ascii=False))}</code></p>"
    if index == last and episode.error:
        body += f'<p class="eval-problem">{html.escape(episode.error)}</p>'
    view = observation_view(record.get("observation"), first.get("observation"))
    return head + body + render_view(view) + "</div>"


def show(
    runs: Runs, evaluate: Evaluate, environment_id: str, request: gr.Request | None, *boards: gr.HTML
) -> dict[Any, Any]:
    """The tab for a newly opened environment: its name, and its leaderboard here and in `boards`."""
    board = leaderboard_html(runs.board(request, split_pin(environment_id)[0])) if environment_id else ""
    return {
        evaluate.environment: f"Evaluating **`{environment_id}`**" if environment_id else "",
        evaluate.board: board,
    } | dict.fromkeys(boards, board)


def open_episode(runs: Runs, evaluate: Evaluate, episode_id: str, request: gr.Request | None) -> dict[Any, Any]:
    try:
        episode = runs.episode(request, episode_id.strip())
    except EnvhubError as exc:
        return {evaluate.viewer: f"<p>{html.escape(exc.message)}</p>", evaluate.episode: None}
    share = runs.share_link(request, episode.id)
    last = max(runs.store.steps.count(episode) - 1, 0)
    return {
        evaluate.episode_id: episode.id,
        evaluate.episode: episode.id,
        evaluate.step: gr.Slider(0, max(last, 1), value=0, step=1),
        evaluate.viewer: step_html(runs.store.steps, episode, 0, share),
    }


def run_view(runs: Runs, evaluate: Evaluate, evaluation_id: str, request: gr.Request | None) -> dict[Any, Any]:
    """A run's progress, episodes and leaderboard, followed while it is under way."""
    if not evaluation_id:
        return {evaluate.timer: gr.Timer(active=False)}
    run = runs.public(request, evaluation_id)
    under_way = run.status in UNDER_WAY
    return {
        evaluate.progress: progress_html(run),
        evaluate.results: result_rows(run),
        evaluate.board: leaderboard_html(runs.board(request, run.environment)),
        evaluate.cancel: gr.Button(visible=under_way),
        evaluate.timer: gr.Timer(active=under_way),
    }


def open_run(runs: Runs, evaluate: Evaluate, run_id: str, request: gr.Request | None) -> dict[Any, Any]:
    """A past run, as from the leaderboard: its figures and episodes, and its first episode in the viewer."""
    try:
        run = runs.public(request, run_id.strip())
    except EnvhubError as exc:
        return {evaluate.message: exc.message}
    shown = {evaluate.evaluation: run.id, evaluate.message: ""} | run_view(runs, evaluate, run.id, request)
    shown |= run_form(evaluate, run)
    return shown | (open_episode(runs, evaluate, f"{run.id}-{run.episodes[0].index}", request) if run.episodes else {})


def wire(
    runs: Runs,
    presets: ModelPresets,
    evaluator: Evaluator,
    runner: Runner,
    hf_endpoint: str,
    evaluate: Evaluate,
    selected: gr.Textbox,
) -> None:
    access, visitors = runs.endpoints.access, runs.visitors

    def follow(request: gr.Request, evaluation_id: str, environment_id: str) -> dict[Any, Any]:
        return run_view(runs, evaluate, evaluation_id, request)

    def from_board(request: gr.Request, event: gr.EventData) -> dict[Any, Any]:
        return open_run(runs, evaluate, str(getattr(event, "run", "")), request)

    def presets_of(caller: Caller) -> list[str]:
        try:
            owner = preset_owner(caller, access)
        except EnvhubError:
            return []  # not signed in where sign-in is on: nothing saved, nothing to show
        return [p.name for p in presets.list(owner)]

    def choose_policy(request: gr.Request, policy: str, preset: str | None) -> list[Any]:
        shown = policy == "model"
        saved = shown or policy in HARNESSES  # a harness takes a saved model only
        names = presets_of(visitors.caller(request)) if saved else []
        return [  # a saved model stays chosen when it is still one of yours (a past run's, opened)
            gr.Dropdown(choices=names, value=preset if preset in names else None, visible=saved),
            *[gr.Textbox(visible=shown)] * 4,
            gr.Button(visible=shown),
        ]

    def use_preset(request: gr.Request, name: str | None) -> dict[Any, Any]:
        if not name:
            return {}
        try:
            preset = presets.get(preset_owner(visitors.caller(request), access), name)
        except EnvhubError as exc:
            return {evaluate.message: exc.message}
        key = "its API key is saved (and never shown)" if preset.api_key_sealed else "it has no API key"
        return {
            evaluate.base_url: preset.base_url,
            evaluate.model: preset.model,
            evaluate.api_key: "",
            evaluate.message: f"Saved model `{name}`: {key}.",
        }

    def save(request: gr.Request, name: str, base_url: str, model: str, api_key: str) -> dict[Any, Any]:
        config: dict[str, Any] = {"base_url": (base_url or "").strip(), "model": (model or "").strip()}
        if api_key:
            config["api_key"] = api_key  # else a preset saved before under the name keeps its key
        try:
            owner = preset_owner(visitors.acting_caller(request), access)
            preset = presets.save(owner, (name or "").strip(), ModelConfig.model_validate(config))
        except ValidationError as exc:
            return {evaluate.message: "**Not saved:** " + "; ".join(str(e["msg"]) for e in exc.errors())}
        except EnvhubError as exc:
            return {evaluate.message: f"**Not saved:** {exc.message}"}
        key = "its API key is sealed, never shown" if preset.api_key_sealed else "without an API key"
        return {
            evaluate.preset: gr.Dropdown(choices=[p.name for p in presets.list(owner)], value=preset.name),
            evaluate.api_key: "",
            evaluate.message: f"Saved model `{preset.name}`: {key}.",
        }

    async def start(
        request: gr.Request, environment_id: str, policy: str, preset: str | None, base_url: str, model: str,
        api_key: str, tasks: str | None, episodes: float, concurrency: float, max_steps: float,
    ) -> dict[Any, Any]:  # fmt: skip
        if not environment_id:
            return {evaluate.message: "Open an environment first."}
        choice: Any = policy
        if policy in HARNESSES:
            if not preset:
                return {evaluate.message: f"**Not started:** choose the saved model {policy} calls."}
            choice = {"harness": policy, "preset": preset}
        elif policy == "model" and preset:
            choice = {"preset": preset}
        elif policy == "model":
            config: dict[str, Any] = {"base_url": (base_url or "").strip(), "model": (model or "").strip()}
            if api_key:
                config["api_key"] = api_key
            choice = {"model": config}
        try:
            caller = await asyncio.to_thread(visitors.acting_caller, request)
            environment = await read_environment(runs.engine, environment_id)
            # The endpoint Play would reuse, when it runs, is evaluated as it is; else one is launched for the run.
            used = await running(runs.endpoints, caller, environment) if environment is not None else None
            target = {"endpoint": used.id} if used is not None else {"environment": environment_id}
            dataset = dataset_choice(tasks)
            if dataset is not None:
                target |= {"dataset": dataset[0], "split": dataset[1]}
            elif tasks:
                target |= {"split": tasks}
            body = EvaluationRequest(
                **target,
                policy=choice,
                episodes=int(episodes or 1),
                concurrency=int(concurrency or 1),
                max_steps=int(max_steps or 100),
            )
            connection = connection_of(request)
            if connection is None:
                raise ValueError("this page has no connection to the server; reload it")
            client = visitors.client(request, caller)
            run = await evaluator.start(body, caller, client, lambda e: own_gateway(connection, e))
        except ValidationError as exc:
            return {evaluate.message: "**Not started:** " + "; ".join(str(e["msg"]) for e in exc.errors())}
        except (EnvhubError, ValueError) as exc:
            return {evaluate.message: f"**Not started:** {getattr(exc, 'message', str(exc))}"}
        followed = await asyncio.to_thread(follow, request, run.id, environment_id)
        return {evaluate.message: f"Started `{run.id}`.", evaluate.evaluation: run.id} | followed

    async def cancel(request: gr.Request, evaluation_id: str, environment_id: str) -> dict[Any, Any]:
        run = await asyncio.to_thread(runs.get, request, evaluation_id)
        if not access.may_manage(await asyncio.to_thread(visitors.acting_caller, request), run.owner):
            return {evaluate.message: "**Not cancelled:** only whoever started it, or an admin, may."}
        await runner.cancel(evaluation_id)
        followed = await asyncio.to_thread(follow, request, evaluation_id, environment_id)
        return {evaluate.message: f"Cancelled `{evaluation_id}`."} | followed

    async def push(request: gr.Request, evaluation_id: str, repo: str, environment_id: str) -> dict[Any, Any]:
        """Said beside the button: the dataset pushed, or whole and escaped, why not and what to do here."""
        if not evaluation_id:
            return {evaluate.pushed: "<p>Run an evaluation first.</p>"}
        try:
            caller = await asyncio.to_thread(visitors.acting_caller, request)
            if caller.token is None:
                note = sign_in_note(visitors.sign_in, environment_id, "to push with your Hub token.", "Pushing")
                return {evaluate.pushed: note}
            await asyncio.to_thread(runs.get, request, evaluation_id)
            url = await asyncio.to_thread(
                push_rollouts, runs.store, evaluation_id, (repo or "").strip(), token=caller.token, endpoint=hf_endpoint
            )
        except EnvhubError as exc:
            return {evaluate.pushed: f"<p><b>Not pushed:</b> {html.escape(exc.message)}</p>"}
        link = f'<a href="{html.escape(url)}" target="_blank">{html.escape(repo)}</a>'
        return {evaluate.pushed: f"<p>Pushed the rollouts of <code>{html.escape(evaluation_id)}</code> to {link}.</p>"}

    def pick(request: gr.Request, event: gr.SelectData) -> dict[Any, Any]:
        row = event.row_value if isinstance(event.row_value, list) else []
        return open_episode(runs, evaluate, str(row[0]), request) if row else {}

    def load(request: gr.Request, episode_id: str) -> dict[Any, Any]:
        return open_episode(runs, evaluate, episode_id or "", request)

    def move(request: gr.Request, episode_id: str | None, index: float, delta: int) -> dict[Any, Any]:
        if not episode_id:
            return {}
        episode = runs.episode(request, episode_id)
        index = max(0, min(int(index) + delta, runs.store.steps.count(episode) - 1))
        share = runs.share_link(request, episode.id)
        return {evaluate.step: index, evaluate.viewer: step_html(runs.store.steps, episode, index, share)}

    def previous(request: gr.Request, episode_id: str | None, index: float) -> dict[Any, Any]:
        return move(request, episode_id, index, -1)

    def next_(request: gr.Request, episode_id: str | None, index: float) -> dict[Any, Any]:
        return move(request, episode_id, index, 1)

    def scrub(request: gr.Request, episode_id: str | None, index: float) -> dict[Any, Any]:
        return move(request, episode_id, index, 0)

    def replay(request: gr.Request, episode_id: str | None, index: float, label: str) -> dict[Any, Any]:
        """Play the episode from this step (from the start when at its end), or pause it."""
        if label == PAUSE or not episode_id:
            return {evaluate.replay: gr.Button(PLAY), evaluate.replay_timer: gr.Timer(active=False)}
        last = runs.store.steps.count(runs.episode(request, episode_id)) - 1
        start = 0 if int(index) >= last else int(index)
        return move(request, episode_id, start, 0) | {
            evaluate.replay: gr.Button(PAUSE),
            evaluate.replay_timer: gr.Timer(active=True),
        }

    def replay_step(request: gr.Request, episode_id: str | None, index: float) -> dict[Any, Any]:
        shown = move(request, episode_id, index, 1)
        at_end = not episode_id or shown.get(evaluate.step) == int(index)
        if at_end:
            shown |= {evaluate.replay: gr.Button(PLAY), evaluate.replay_timer: gr.Timer(active=False)}
        return shown

    inputs = [selected, evaluate.policy, evaluate.preset, evaluate.base_url, evaluate.model, evaluate.api_key,
              evaluate.tasks, evaluate.episodes, evaluate.concurrency, evaluate.max_steps]  # fmt: skip
    typed = [evaluate.base_url, evaluate.model, evaluate.api_key]
    model_fields = [evaluate.preset, *typed, evaluate.preset_name, evaluate.save_preset]
    evaluate.policy.change(choose_policy, [evaluate.policy, evaluate.preset], model_fields, show_progress="hidden")
    evaluate.preset.input(use_preset, [evaluate.preset], [*typed, evaluate.message], show_progress="hidden")
    for box in typed:  # a model typed in is not the saved one any more
        box.input(lambda: gr.Dropdown(value=None), None, [evaluate.preset], show_progress="hidden")
    evaluate.save_preset.click(
        save, [evaluate.preset_name, *typed], [evaluate.preset, evaluate.api_key, evaluate.message]
    )
    evaluate.run.click(start, inputs, [evaluate.message, evaluate.evaluation, *evaluate.followed])
    evaluate.cancel.click(cancel, [evaluate.evaluation, selected], [evaluate.message, *evaluate.followed])
    evaluate.push.click(push, [evaluate.evaluation, evaluate.repo, selected], [evaluate.pushed])
    evaluate.timer.tick(follow, [evaluate.evaluation, selected], evaluate.followed, show_progress="hidden")
    viewer = [evaluate.episode_id, evaluate.episode, evaluate.step, evaluate.viewer]
    evaluate.results.select(pick, None, viewer)
    opened = [evaluate.evaluation, evaluate.message, *evaluate.followed, *evaluate.form, *viewer]
    evaluate.board.click(from_board, None, opened)
    evaluate.episode_id.submit(load, [evaluate.episode_id], viewer)
    evaluate.previous.click(previous, [evaluate.episode, evaluate.step], [evaluate.step, evaluate.viewer])
    evaluate.next.click(next_, [evaluate.episode, evaluate.step], [evaluate.step, evaluate.viewer])
    evaluate.step.release(scrub, [evaluate.episode, evaluate.step], [evaluate.step, evaluate.viewer])
    replayed = [evaluate.step, evaluate.viewer, evaluate.replay, evaluate.replay_timer]
    evaluate.replay.click(replay, [evaluate.episode, evaluate.step, evaluate.replay], replayed, show_progress="hidden")
    evaluate.replay_timer.tick(replay_step, [evaluate.episode, evaluate.step], replayed, show_progress="hidden")
