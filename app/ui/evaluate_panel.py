"""The Evaluate tab's parts: its form, its run's figures and leaderboard, and its episode viewer; and the form set
as a past run was started, ready to run again."""

from dataclasses import dataclass
from typing import Any

import gradio as gr

from app.ui.tasksets import SEEDS
from evals.harnesses import HARNESSES
from evals.models import EvaluationBase
from rollout.players import BASELINES

# A harness CLI plays with one of the caller's saved models (its key stays sealed at the model door).
POLICIES: list[str | tuple[str, str]] = ["random", "first-legal", "model"]
POLICIES += [(f"{name} (harness, saved model)", name) for name in HARNESSES]
PLAY, PAUSE = "▶ Play", "❚❚ Pause"  # glyphs every system font has
REPLAY_S = 0.8  # between steps when the viewer plays an episode


@dataclass(frozen=True)
class Evaluate:
    environment: gr.Markdown
    policy: gr.Dropdown
    preset: gr.Dropdown
    base_url: gr.Textbox
    model: gr.Textbox
    api_key: gr.Textbox
    preset_name: gr.Textbox
    save_preset: gr.Button
    tasks: gr.Dropdown
    episodes: gr.Number
    concurrency: gr.Number
    max_steps: gr.Number
    run: gr.Button
    cancel: gr.Button
    message: gr.Markdown
    evaluation: gr.State
    progress: gr.HTML
    results: gr.Dataframe
    repo: gr.Textbox
    push: gr.Button
    pushed: gr.HTML
    board: gr.HTML
    timer: gr.Timer
    episode_id: gr.Textbox
    step: gr.Slider
    previous: gr.Button
    next: gr.Button
    replay: gr.Button
    replay_timer: gr.Timer
    viewer: gr.HTML
    episode: gr.State

    @property
    def followed(self) -> list[Any]:
        return [self.progress, self.results, self.board, self.cancel, self.timer]

    @property
    def form(self) -> list[Any]:
        """What a past run sets when it is opened (run_form)."""
        fields = [self.policy, self.preset, self.base_url, self.model, self.api_key]
        return [*fields, self.episodes, self.concurrency, self.max_steps]


def build() -> Evaluate:
    environment = gr.Markdown("Open an environment, then evaluate it here.", elem_id="eval-environment")
    with gr.Row():
        with gr.Column(scale=2):
            policy = gr.Dropdown(POLICIES, value="random", label="Policy", elem_id="eval-policy")
            preset = gr.Dropdown([], value=None, label="Saved models", visible=False, elem_id="eval-preset")
            base_url = gr.Textbox(label="Model server (OpenAI-compatible base URL)", visible=False,
                                  placeholder="http://127.0.0.1:8000/v1", elem_id="eval-base-url")  # fmt: skip
            model = gr.Textbox(label="Model name", placeholder="Qwen/Qwen3-8B", visible=False, elem_id="eval-model")
            api_key = gr.Textbox(label="API key (never shown; kept, sealed, only in a preset you save)",
                                 visible=False, type="password", elem_id="eval-api-key")  # fmt: skip
            with gr.Row():
                preset_name = gr.Textbox(label="Save as preset", placeholder="my-model", visible=False, scale=3,
                                         elem_id="eval-preset-name")  # fmt: skip
                save_preset = gr.Button("Save", visible=False, scale=1, elem_id="eval-preset-save")
            tasks = gr.Dropdown(
                [SEEDS],
                value="",
                label="Play on",
                info="seeds, a Task API split, or a linked dataset's split",
                elem_id="eval-tasks",
            )
            with gr.Row():
                episodes = gr.Number(
                    8,
                    label="Episodes (the first N tasks of a split)",
                    precision=0,
                    minimum=1,
                    maximum=1000,
                    elem_id="eval-episodes",
                )
                concurrency = gr.Number(
                    2, label="Concurrency", precision=0, minimum=1, maximum=64, elem_id="eval-concurrency"
                )
                max_steps = gr.Number(
                    100, label="Max steps", precision=0, minimum=1, maximum=10_000, elem_id="eval-max-steps"
                )
            with gr.Row():
                run = gr.Button("▶ Run evaluation", variant="primary", elem_id="eval-run")
                cancel = gr.Button("■ Cancel", variant="stop", visible=False, elem_id="eval-cancel")
            message = gr.Markdown(elem_id="eval-message")
        with gr.Column(scale=3):
            progress = gr.HTML(elem_id="eval-progress")
            results = gr.Dataframe(
                headers=["episode", "seed", "status", "reward", "steps", "invalid", "tokens", "error"],
                interactive=False,
                elem_id="eval-results",
            )
            with gr.Row():
                repo = gr.Textbox(label="Push the rollouts to a Hub dataset (with your token)", scale=3,
                                  placeholder="you/wordle-rollouts", elem_id="eval-repo")  # fmt: skip
                push = gr.Button("⇪ Push to the Hub", scale=1, elem_id="eval-push")
            pushed = gr.HTML(elem_id="eval-push-message")
    gr.Markdown("### Leaderboard")
    board = gr.HTML(elem_id="eval-leaderboard", js_on_load=RUN_CLICKS)
    gr.Markdown("### Episode viewer")
    with gr.Row():
        episode_id = gr.Textbox(
            label="Episode", placeholder="ev-…-0 (click a row above)", elem_id="eval-episode-id", scale=3
        )
        previous = gr.Button("◀ Previous", elem_id="eval-previous", scale=1)
        next_ = gr.Button("Next ▶", elem_id="eval-next", scale=1)
        replay = gr.Button(PLAY, elem_id="eval-replay", scale=1)
    step = gr.Slider(0, 1, value=0, step=1, label="Step", elem_id="eval-step")
    viewer = gr.HTML(elem_id="eval-viewer")
    return Evaluate(
        environment, policy, preset, base_url, model, api_key, preset_name, save_preset, tasks, episodes, concurrency,
        max_steps, run, cancel, message, gr.State(""), progress, results, repo, push, pushed, board,
        gr.Timer(1.0, active=False), episode_id, step, previous, next_, replay, gr.Timer(REPLAY_S, active=False),
        viewer, gr.State(None),
    )  # fmt: skip


# A click on a run's link opens the run in place; a modified click (new tab) follows its ?run= link.
RUN_CLICKS = """
element.addEventListener('click', (event) => {
  const link = event.target.closest('a[data-run]');
  if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  trigger('click', {run: link.dataset.run});
});
"""


def run_form(evaluate: "Evaluate", run: EvaluationBase) -> dict[Any, Any]:
    """The run's own policy in the form (a model's server and name, never its key), not the form's default."""
    policy = run.policy
    kind = str(policy.get("kind", ""))
    form: dict[Any, Any] = {evaluate.episodes: run.episodes_planned, evaluate.concurrency: run.concurrency}
    if isinstance(run.limits.get("max_steps"), int):
        form[evaluate.max_steps] = run.limits["max_steps"]
    if kind == "harness" and policy.get("harness") in HARNESSES:
        preset = str(policy.get("preset") or "")
        chosen = gr.Dropdown(choices=[preset], value=preset) if preset else gr.Dropdown(value=None)
        return form | {evaluate.policy: policy["harness"], evaluate.preset: chosen}
    if kind == "model":
        return form | {
            evaluate.policy: "model",
            evaluate.base_url: str(policy.get("base_url") or ""),
            evaluate.model: str(policy.get("model") or ""),
            evaluate.api_key: "",
        }
    if kind in BASELINES:
        return form | {evaluate.policy: kind}
    return form
