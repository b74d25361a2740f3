"""Evaluations: a model run's speed at concurrency 8 against 1, the harness's own cost per step, and how fast
a leaderboard and an episode open with 1,000 episodes stored.

    .venv/bin/python -m bench.evals [--episodes 64] [--concurrency 8] [--delay-ms 50] [--rounds 2] [--stored 1000]

envhub runs as its own process (`python -m app serve`, its own SQLite catalog, no Hub). The model is
the tests' fake OpenAI-compatible server in this process, answering every request after a fixed
delay with the same valid Wordle guess, so each episode is six model calls. Each run launches the
wordle template for itself (process backend) and plays through envhub's gateway.

- speed: the same run (`--episodes`, max 6 steps) at concurrency 1 and at `--concurrency`,
  alternating for `--rounds` rounds; the run's own wall time (from its first episode to its last)
  and the time from the POST to `finished`.
- harness: per step of the concurrency-1 runs, the episode's wall time less the model's and the
  environment's time (the harness: prompt, parsing, validation, recording, the client), and the
  model client's own time over the scripted delay.
- stored: `--stored` episodes of 20 steps (copied from a real one) in 20 runs on one environment,
  written through the runner; then GET the leaderboard, one run with its episodes, and one episode,
  20 times each.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from app.settings import REPO_ROOT
from bench.envhub import envhub_server
from bench.report import load_average, machine_line, percentile, table, verdict
from core.db import create_db_engine
from evals.models import Evaluation, EvaluationStatus
from evals.runs import new_evaluation_id
from evals.steps import Budget
from evals.store import EvaluationStore, episode_id
from rollout.episodes import EpisodeResult, EpisodeSpec
from tests.fakemodel import FakeModel, Reply

TEMPLATES = REPO_ROOT / "spaces_templates"


def run(url: str, model_url: str, episodes: int, concurrency: int) -> dict[str, Any]:
    started = time.perf_counter()
    body = {
        "environment": "template:wordle",
        "policy": {"model": {"base_url": model_url, "model": "fake"}},
        "episodes": episodes,
        "concurrency": concurrency,
        "max_steps": 6,
    }
    response = httpx.post(f"{url}/api/evaluations", json=body, timeout=30)
    if response.status_code != 201:
        raise SystemExit(f"POST /api/evaluations answered {response.status_code}: {response.text}")
    created = response.json()
    while True:
        current: dict[str, Any] = httpx.get(f"{url}/api/evaluations/{created['id']}", timeout=30).json()
        if current["status"] not in ("queued", "running"):
            break
        time.sleep(0.5)  # as a UI follows a run (each poll reads the run and its episodes)
    assert current["status"] == "finished", current["message"]
    current["end_to_end_s"] = time.perf_counter() - started
    return current


def harness_ms(url: str, evaluation_id: str, delay_ms: float) -> tuple[list[float], list[float]]:
    """Per step: the harness's own time, and the model client's time over the scripted delay."""
    own, client = [], []
    lines = httpx.get(f"{url}/api/evaluations/{evaluation_id}/episodes.jsonl", timeout=30).text.splitlines()
    for line in lines:
        episode = json.loads(line)
        steps = [r for r in episode["records"] if r["kind"] == "step"]
        model = sum(r["model_ms"] for r in steps)
        env = sum(r["env_ms"] for r in episode["records"])
        own.append((episode["wall_s"] * 1000 - model - env) / len(steps))
        client += [r["model_ms"] - delay_ms for r in steps]
    return own, client


def stored(url: str, database: Path, count: int) -> dict[str, list[float]]:
    """Fill the catalog with `count` episodes in 20 runs, then time what the leaderboard and the viewer read."""
    store = EvaluationStore(create_db_engine(f"sqlite:///{database}"), "bench")
    real = httpx.get(f"{url}/api/evaluations", timeout=30).json()[0]
    sample = httpx.get(f"{url}/api/evaluations/{real['id']}/episodes.jsonl", timeout=30).text.splitlines()[0]
    records = json.loads(sample)["records"]
    records = [{**r, "index": n} for n, r in enumerate((records * 4)[:21])]
    runs = []
    for r in range(20):
        row = store.create(
            Evaluation(
                id=new_evaluation_id(),
                environment="template:wordle",
                revision=real["revision"],
                policy={"kind": "model", "model": f"model-{r}"},
                policy_label=f"model-{r}",
                taskset_label="seeds",
                episodes_planned=count // 20,
                concurrency=8,
                status=EvaluationStatus.FINISHED,
            )
        )
        for i in range(count // 20):
            budget = Budget(len(json.dumps(records)) + 1)  # every record whole, as the real one had them
            for record in records:
                store.steps.write(episode_id(row.id, i), record, budget)
            steps = sum(r["kind"] == "step" for r in records)
            result = EpisodeResult(EpisodeSpec(i, seed=i), len(records), steps, reward=float(i % 2), done=True)
            store.record(row, result, wall_s=1.0)
        runs.append(row.id)
    times: dict[str, list[float]] = {"leaderboard": [], "run with its episodes": [], "one episode (20 steps)": []}
    with httpx.Client(base_url=url, timeout=30) as client:
        for _ in range(20):
            for name, path in (
                ("leaderboard", "/api/environments/template:wordle/leaderboard"),
                ("run with its episodes", f"/api/evaluations/{runs[0]}"),
                ("one episode (20 steps)", f"/api/evaluations/episodes/{runs[0]}-7"),
            ):
                started = time.perf_counter()
                assert client.get(path).status_code == 200
                times[name].append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--delay-ms", type=float, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--stored", type=int, default=1000)
    args = parser.parse_args()
    print(f"# bench.evals: {machine_line()}; load {load_average()}\n")
    fake = FakeModel(lambda body: Reply(text='```json\n{"guess": "crane"}\n```', delay_s=args.delay_ms / 1000))
    with (
        tempfile.TemporaryDirectory(prefix="bench-evals-") as scratch,
        # The fake model listens on loopback, which envhub refuses unless told otherwise.
        envhub_server(Path(scratch), TEMPLATES, settings={"ENVHUB_ALLOW_PRIVATE_URLS": "true"}) as (url, _),
    ):
        results: dict[int, list[dict[str, Any]]] = {1: [], args.concurrency: []}
        run(url, fake.url, 4, 2)  # warm-up: the zygote and the first launch
        for _ in range(args.rounds):
            for k in (1, args.concurrency):
                results[k].append(run(url, fake.url, args.episodes, k))
        rows = []
        for k, runs in results.items():
            walls = [r["summary"]["wall_s"] for r in runs]
            end_to_end = min(r["end_to_end_s"] for r in runs)
            steps = runs[0]["summary"]["mean_steps"]
            rows.append(
                [k, len(runs), args.episodes, f"{min(walls):.2f}", f"{max(walls):.2f}", f"{end_to_end:.2f}", steps]
            )
        print(table(["concurrency", "runs", "episodes", "wall s (best)", "wall s (worst)", "POST to finished s",
                     "steps/episode"], rows))  # fmt: skip
        serial = min(r["summary"]["wall_s"] for r in results[1])
        parallel = min(r["summary"]["wall_s"] for r in results[args.concurrency])
        speedup = serial / parallel
        print(f"\nspeed-up at concurrency {args.concurrency}: {speedup:.2f}x (floor 6x: {verdict(speedup >= 6)})\n")

        own: list[float] = []
        client: list[float] = []
        for r in results[1]:
            o, c = harness_ms(url, r["id"], args.delay_ms)
            own += o
            client += c
        figures = [
            ["harness (episode wall - model - environment)", percentile(own, 0.5), percentile(own, 0.95)],
            ["model client over the scripted delay", percentile(client, 0.5), percentile(client, 0.95)],
        ]
        print(
            table(["per step, concurrency 1", "p50 ms", "p95 ms"], [[n, f"{a:.2f}", f"{b:.2f}"] for n, a, b in figures])
        )
        print(f"\nharness p50 {percentile(own, 0.5):.2f} ms (floor 2 ms: {verdict(percentile(own, 0.5) <= 2)})\n")

        times = stored(url, Path(scratch) / "envhub.db", args.stored)
        print(table(["with 1,000 episodes stored", "p50 ms", "max ms"],
                    [[name, f"{percentile(t, 0.5):.1f}", f"{max(t):.1f}"] for name, t in times.items()]))  # fmt: skip
        worst = max(max(t) for t in times.values())
        print(f"\nslowest open {worst:.1f} ms (floor 300 ms: {verdict(worst <= 300)}); load {load_average()}")
    fake.close()


if __name__ == "__main__":
    main()
