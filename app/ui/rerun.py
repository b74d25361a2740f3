"""The Evaluate form set as a past run was started: its policy, episodes and limits, ready to run again."""

from typing import TYPE_CHECKING, Any

import gradio as gr

from evals.harnesses import HARNESSES
from evals.models import EvaluationBase
from rollout.players import BASELINES

if TYPE_CHECKING:
    from app.ui.evaluate import Evaluate


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
