"""The runner's rows: episodes stored with the summary, and runs orphaned by an envhub process that died."""

from sqlalchemy import Engine

from evals.models import Evaluation, EvaluationStatus
from evals.runs import Runner
from rollout.episodes import EpisodeResult, EpisodeSpec


def evaluation(runner: Runner, status: EvaluationStatus) -> Evaluation:
    row = Evaluation(
        id=f"ev-{runner.instance}",
        environment="template:wordle",
        policy={"kind": "random"},
        policy_label="random",
        taskset_label="seeds",
        episodes_planned=3,
        concurrency=1,
        status=status,
    )
    return runner.create(row)


def test_each_stored_episode_updates_the_summary(engine: Engine) -> None:
    runner = Runner(engine, "here")
    run = evaluation(runner, EvaluationStatus.RUNNING)
    for index, reward in enumerate([1.0, 0.0]):
        result = EpisodeResult(EpisodeSpec(index, seed=index), reward=reward, final_reward=reward, done=True)
        result.steps = [{"kind": "reset"}, {"kind": "step"}]
        summary = runner.record(run, result, wall_s=1.5)
    assert summary["episodes"] == 2 and summary["mean_reward"] == 0.5 and summary["success_rate"] == 0.5
    assert runner.get(run.id).summary == summary
    assert [e.steps for e in runner.episodes(run.id)] == [1, 1]


def test_runs_of_a_dead_process_are_interrupted_and_keep_their_episodes(engine: Engine) -> None:
    dead, alive, here = Runner(engine, "dead"), Runner(engine, "alive"), Runner(engine, "here")
    orphan, other = evaluation(dead, EvaluationStatus.RUNNING), evaluation(alive, EvaluationStatus.RUNNING)
    mine = evaluation(here, EvaluationStatus.QUEUED)  # recorded by this process, which no longer runs it
    dead.record(orphan, EpisodeResult(EpisodeSpec(0, seed=0), done=True), wall_s=1)

    assert here.interrupt_orphans(live_instances={"alive", "here"}) == 2
    assert here.get(orphan.id).status == EvaluationStatus.INTERRUPTED
    assert here.get(mine.id).status == EvaluationStatus.INTERRUPTED
    assert here.get(other.id).status == EvaluationStatus.RUNNING  # a live process's run is its own
    assert len(here.episodes(orphan.id)) == 1
