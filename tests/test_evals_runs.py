"""The evaluation store: episodes stored with the summary, and runs orphaned by an envhub process that died."""

from sqlalchemy import Engine

from evals.models import Evaluation, EvaluationStatus
from evals.store import EvaluationStore
from rollout.episodes import EpisodeResult, EpisodeSpec


def evaluation(store: EvaluationStore, status: EvaluationStatus, name: str = "") -> Evaluation:
    row = Evaluation(
        id=f"ev-{store.instance}{name}",
        environment="template:wordle",
        policy={"kind": "random"},
        policy_label="random",
        taskset_label="seeds",
        episodes_planned=3,
        concurrency=1,
        status=status,
    )
    return store.create(row)


def test_each_stored_episode_updates_the_summary(engine: Engine) -> None:
    store = EvaluationStore(engine, "here")
    run = evaluation(store, EvaluationStatus.RUNNING)
    for index, reward in enumerate([1.0, 0.0]):
        result = EpisodeResult(EpisodeSpec(index, seed=index), 2, 1, reward=reward, final_reward=reward, done=True)
        summary = store.record(run, result, wall_s=1.5)
    assert summary["episodes"] == 2 and summary["mean_reward"] == 0.5 and summary["success_rate"] == 0.5
    assert store.get(run.id).summary == summary
    assert [e.steps for e in store.episodes(run.id)] == [1, 1]


def test_runs_of_a_dead_process_are_interrupted_and_keep_their_episodes(engine: Engine) -> None:
    dead, alive, here = (EvaluationStore(engine, name) for name in ("dead", "alive", "here"))
    orphan, other = evaluation(dead, EvaluationStatus.RUNNING), evaluation(alive, EvaluationStatus.RUNNING)
    mine = evaluation(here, EvaluationStatus.QUEUED)  # recorded by this process, which no longer runs it
    running = evaluation(here, EvaluationStatus.RUNNING, "-running")  # and one it runs
    dead.record(orphan, EpisodeResult(EpisodeSpec(0, seed=0), done=True), wall_s=1)

    assert here.interrupt_orphans({"alive", "here"}, running_here={running.id}) == 2
    assert here.get(orphan.id).status == EvaluationStatus.INTERRUPTED
    assert here.get(mine.id).status == EvaluationStatus.INTERRUPTED
    assert here.get(other.id).status == EvaluationStatus.RUNNING  # a live process's run is its own
    assert here.get(running.id).status == EvaluationStatus.RUNNING
    assert len(here.episodes(orphan.id)) == 1
