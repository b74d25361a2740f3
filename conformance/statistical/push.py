""" "The tasks that teach this model" as a Hub dataset: one task spec a line (RFC 013's keys, with the reset options
that start it and its P(signal)), most signal first, and a card that says which report measured them for whom."""

import json
from collections.abc import Iterator, Sequence

from conformance.report import Report
from conformance.statistical.exports import task_split
from conformance.statistical.models import TaskDifficulty
from evals.hub_push import push_dataset

__all__ = ["DATA_FILE", "push_teaching"]

DATA_FILE = "data/tasks.jsonl"


def _lines(rows: Sequence[TaskDifficulty]) -> Iterator[str]:
    for spec, row in zip(task_split(rows), rows, strict=True):
        yield json.dumps(spec | {"reset": row.reset, "mean_reward": row.mean_reward, "samples": row.samples}) + "\n"


def _card(report_id: int, report: Report, rows: Sequence[TaskDifficulty]) -> str:
    player = rows[0].player if rows else "no player"
    run = report.statistics
    group = rows[0].group_size if rows else run.settings.get("group_size") if run else None
    verdict = report.verdict.value if report.verdict is not None else "none"
    policy = run.policy_version if run else "no gate policy"
    return (
        "---\ntags:\n  - openenv\n  - rl-environment\n  - task-split\nconfigs:\n  - config_name: default\n"
        f"    data_files: {DATA_FILE}\n---\n\n"
        f"# The tasks of {report.environment} that teach {player}\n\n"
        f"The tasks whose pass rate p for `{player}` is strictly between 0 and 1, most training signal first: "
        f"P(signal) = 1 − p^G − (1 − p)^G is the chance a GRPO group of G = {group} has a non-zero advantage. "
        f"One task a line of `{DATA_FILE}`: `reset` starts it on the environment; `difficulty` is the share of "
        "samples that failed (RFC 013).\n\n"
        "| | |\n|---|---|\n"
        f"| environment | `{report.environment}` |\n"
        f"| revision | `{report.revision or 'a local folder'}` |\n"
        f"| statistical report | {report_id} ({policy}, verdict {verdict}) |\n"
        f"| tasks | {len(rows)} |\n"
    )


def push_teaching(
    report_id: int,
    report: Report,
    rows: Sequence[TaskDifficulty],
    repo_id: str,
    *,
    token: str | None,
    endpoint: str,
    private: bool,
) -> str:
    """Create (or reuse) the dataset repo and commit the tasks that teach (`rows`, in order) and their card."""
    message = f"The tasks that teach, from envhub statistical report {report_id}"
    files = {DATA_FILE: _lines(rows)}
    return push_dataset(
        repo_id, files, _card(report_id, report, rows), token=token, endpoint=endpoint, private=private, message=message
    )
