"""A run's rollouts leave envhub: as JSONL (one episode per line, each with the run's metadata, written a step at a
time), and as a dataset repo on the Hub, pushed with the user's own token, with a card naming the environment, its
revision, the policy and the summary."""

import json
from collections.abc import Iterator
from typing import Any

from evals.hub_push import push_dataset
from evals.models import EpisodeBase, Evaluation
from evals.steps import streamed
from evals.store import EvaluationStore

__all__ = ["dataset_card", "push_rollouts", "rollouts_jsonl"]

DATA_FILE = "data/episodes.jsonl"


def _metadata(run: Evaluation) -> dict[str, Any]:
    return {
        "evaluation": run.id,
        "environment": run.environment,
        "revision": run.revision,
        "policy": run.policy,
        "taskset": run.taskset_label,
        "limits": run.limits,
    }


def rollouts_jsonl(store: EvaluationStore, evaluation_id: str) -> Iterator[str]:
    """The run's episodes, a line each with every record, in pieces: a run's steps may be more than fit in memory.
    An unknown run is refused here, before the first piece."""
    return _lines(store, store.get(evaluation_id))


def _lines(store: EvaluationStore, run: Evaluation) -> Iterator[str]:
    metadata = _metadata(run)
    for episode in store.episodes(run.id):
        head = {"run": metadata, **EpisodeBase.model_validate(episode.model_dump()).model_dump(mode="json")}
        yield from streamed(head, store.steps.records(episode))
        yield "\n"


def _figure(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def dataset_card(run: Evaluation) -> str:
    s = run.summary or {}
    ci = f" ± {s['ci95']:.3f}" if s.get("ci95") is not None else ""
    front = "\n".join(
        [
            "---",
            "tags:",
            "  - openenv",
            "  - rl-environment",
            "  - rollouts",
            "configs:",
            "  - config_name: default",
            f"    data_files: {DATA_FILE}",
            "---",
        ]
    )
    return (
        f"{front}\n\n# Rollouts of {run.policy_label} on {run.environment}\n\n"
        f"Episodes played by envhub's evaluation `{run.id}`, one per line of `{DATA_FILE}`, each with every step: "
        "the observation, the policy's reply, the action sent, the reward and done.\n\n"
        "| | |\n|---|---|\n"
        f"| environment | `{run.environment}` |\n"
        f"| revision | `{run.revision or 'a local folder'}` |\n"
        f"| policy | `{json.dumps(run.policy, ensure_ascii=False)}` |\n"
        f"| task set | {run.taskset_label} |\n"
        f"| episodes | {s.get('episodes', 0)} of {run.episodes_planned} |\n"
        f"| mean reward | {_figure(s.get('mean_reward'))}{ci} (95 % CI) |\n"
        f"| success rate | {_figure(s.get('success_rate'))} |\n"
        f"| mean steps | {_figure(s.get('mean_steps'))} |\n"
        f"| invalid rate | {_figure(s.get('invalid_rate'))} |\n"
        f"| tokens | {s.get('tokens', 0)} |\n"
    )


def push_rollouts(
    store: EvaluationStore, evaluation_id: str, repo_id: str, *, token: str | None, endpoint: str, private: bool = False
) -> str:
    """Create (or reuse) the dataset repo and commit the rollouts and their card; the repo's URL."""
    run = store.get(evaluation_id)
    files = {DATA_FILE: rollouts_jsonl(store, evaluation_id)}
    message = f"Rollouts of envhub evaluation {run.id}"
    return push_dataset(
        repo_id, files, dataset_card(run), token=token, endpoint=endpoint, private=private, message=message
    )
