"""An environment's leaderboard: one row per evaluation run that has episodes, grouped by what runs are
comparable on (the environment's revision and the task set), best mean reward first. It reads only the
runs' stored summaries, never their episodes, and leaves out the runs a statistical report played (its reference
players, adversarial panel and replays): nobody ran those to be ranked."""

from collections.abc import Callable

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from evals.models import Evaluation, EvaluationStatus, Leaderboard, LeaderboardGroup, LeaderboardRow
from rollout.players import BASELINES

__all__ = ["leaderboard"]

_SHOWN = (EvaluationStatus.FINISHED, EvaluationStatus.CANCELLED, EvaluationStatus.INTERRUPTED, EvaluationStatus.RUNNING)


def leaderboard(engine: Engine, environment: str, shown: Callable[[Evaluation], bool]) -> Leaderboard:
    """The board of the runs `shown` lets the caller see."""
    with Session(engine) as session:
        runs = session.exec(
            select(Evaluation)
            .where(Evaluation.environment == environment, col(Evaluation.status).in_(_SHOWN))
            .where(col(Evaluation.statistical_report).is_(None))
            .order_by(col(Evaluation.created_at).desc())
        ).all()
    groups: dict[tuple[str | None, str], list[LeaderboardRow]] = {}
    for run in filter(shown, runs):
        summary = run.summary or {}
        if not summary.get("episodes"):
            continue
        row = LeaderboardRow(
            evaluation=run.id,
            policy=run.policy_label,
            baseline=run.policy.get("kind") in BASELINES,
            mean_reward=summary.get("mean_reward"),
            ci95=summary.get("ci95"),
            success_rate=summary.get("success_rate"),
            episodes=int(summary["episodes"]),
            invalid_rate=summary.get("invalid_rate"),
            date=run.finished_at or run.created_at,
        )
        groups.setdefault((run.revision, run.taskset_label), []).append(row)
    listed = [
        LeaderboardGroup(
            revision=revision,
            taskset=taskset,
            rows=sorted(rows, key=lambda r: (r.mean_reward is None, -(r.mean_reward or 0.0), r.baseline)),
        )
        for (revision, taskset), rows in groups.items()
    ]
    listed.sort(key=lambda g: -sum(r.episodes for r in g.rows))
    return Leaderboard(environment=environment, groups=listed)
