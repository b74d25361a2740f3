"""The statistical lane's cost on a built-in template: episodes played and seconds per player and per check, its
spread across two runs, and the cheapest settings that keep the verdict stable.

    .venv/bin/python -m bench.statistical [--template arithmetic_tasks] [--episodes 8,4,2] [--replays 2]

envhub runs as its own process (`python -m app serve`, its own SQLite catalog, no Hub, no model preset: the
baselines, the adversarial panel and the replays play). For each `--episodes` setting, one envhub with
ENVHUB_STATISTICAL_EPISODES set launches the template once (process backend) and files statistical reports on it:
two with the first setting (the spread), one with each other. A setting keeps the verdict when its report's verdict
and every check's status equal the first run's. The floor: a full report in under 2 minutes.
"""

import argparse
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from app.settings import REPO_ROOT
from bench.envhub import envhub_server
from bench.report import load_average, machine_line, table, verdict

TEMPLATES = REPO_ROOT / "spaces_templates"
FLOOR_S = 120


def report(url: str, endpoint: str) -> tuple[dict[str, Any], float]:
    """A filed report and the seconds from its POST to its end."""
    started = time.perf_counter()
    response = httpx.post(f"{url}/api/statistics", json={"endpoint": endpoint}, timeout=30)
    if response.status_code != 202:
        raise SystemExit(f"POST /api/statistics answered {response.status_code}: {response.text}")
    report_id = response.json()["id"]
    while True:
        filed: dict[str, Any] = httpx.get(f"{url}/api/statistics/{report_id}", timeout=30).json()
        if filed["report"]["status"] != "running":
            return filed, time.perf_counter() - started
        time.sleep(0.5)


def seconds(run: dict[str, Any]) -> float:
    if not run.get("started_at") or not run.get("finished_at"):
        return 0.0
    ended, began = (datetime.fromisoformat(run[key].replace("Z", "+00:00")) for key in ("finished_at", "started_at"))
    return (ended - began).total_seconds()


def cost(url: str, filed: dict[str, Any]) -> list[list[object]]:
    """Each player's evaluation (episodes, seconds), then each check's own seconds and the replays it played."""
    rows: list[list[object]] = []
    for player in filed["report"]["statistics"]["players"]:
        if not player["evaluation"]:  # the oracle plays in the image: bench.oracle measures it
            continue
        run = httpx.get(f"{url}/api/evaluations/{player['evaluation']}", timeout=30).json()
        rows.append([player["label"], "player", player["episodes"], round(seconds(run), 2)])
    for result in filed["report"]["results"]:
        replayed = result["measured"].get("replayed", 0) if result["check_id"].endswith("variance_bound") else 0
        rows.append([result["check_id"], result["status"], replayed, result["duration_s"]])
    return rows


def statistics(filed: dict[str, Any]) -> dict[str, str]:
    """Each player's mean reward ± SE and pass rate's Wilson interval: what the checks compare."""
    shown = {}
    for p in filed["report"]["statistics"]["players"]:
        mean = "-" if p["mean_reward"] is None else f"{p['mean_reward']:.3f} ± {p['se'] or 0:.3f}"
        low, high = p["pass_interval"]
        shown[p["label"]] = f"{mean}; pass [{low:.2f}, {high:.2f}]"
    return shown


def measured(filed: dict[str, Any]) -> dict[str, str]:
    """Each check's own figures (its numbers and intervals), as the report filed them."""
    shown = {}
    for r in filed["report"]["results"]:
        figures = {k: v for k, v in r["measured"].items() if isinstance(v, int | float) and not isinstance(v, bool)}
        figures |= {k: v for k, v in r["measured"].items() if k.endswith("interval")}
        shown[r["check_id"]] = ", ".join(
            f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()
        )
    return shown


def statuses(filed: dict[str, Any]) -> tuple[str, dict[str, str]]:
    return filed["verdict"], {r["check_id"]: r["status"] for r in filed["report"]["results"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--template", default="arithmetic_tasks")
    parser.add_argument("--episodes", default="8,4,2", help="the settings tried, the reference first")
    parser.add_argument("--replays", type=int, default=2)
    args = parser.parse_args()
    print(f"{machine_line()}; load average {load_average()} at the start\n")
    settings = [int(n) for n in args.episodes.split(",")]
    reference: tuple[str, dict[str, str]] | None = None
    kept: list[list[object]] = []
    for n, episodes in enumerate(settings):
        env = {"ENVHUB_STATISTICAL_EPISODES": str(episodes), "ENVHUB_STATISTICAL_REPLAYS": str(args.replays)}
        with (
            tempfile.TemporaryDirectory(prefix="bench-statistical-") as scratch,
            envhub_server(Path(scratch), TEMPLATES, settings=env) as (url, _server),
        ):
            launched = httpx.post(f"{url}/api/endpoints", json={"environment": f"template:{args.template}"})
            endpoint = launched.json()["id"]
            for _ in range(600):
                if httpx.get(f"{url}/api/endpoints/{endpoint}").json()["status"] == "running":
                    break
                time.sleep(0.5)
            runs = [report(url, endpoint) for _ in range(2 if n == 0 else 1)]
            for i, (filed, wall) in enumerate(runs):
                if filed["report"]["status"] != "finished":
                    raise SystemExit(f"the report failed: {filed['report']['message']}")
                played = sum(p["episodes"] for p in filed["report"]["statistics"]["players"])
                head = f"## episodes {episodes}, run {i + 1}: verdict {filed['verdict']}, {played} episodes"
                print(f"{head} in {wall:.1f} s (under {FLOOR_S} s: {verdict(wall < FLOOR_S)})\n")
                print(table(["player or check", "kind or status", "episodes", "s"], cost(url, filed)))
                print()
                found = statuses(filed)
                reference = reference or found
                kept.append([episodes, i + 1, played, round(wall, 1), found[0], found == reference])
            if n == 0:
                first, second = (statistics(filed) for filed, _ in runs)
                spread = [[label, first[label], second.get(label, "-")] for label in first]
                print("## spread across two runs (mean reward ± SE; pass rate, Wilson 95 %)\n")
                print(table(["player", "run 1", "run 2"], spread))
                print()
                first, second = (measured(filed) for filed, _ in runs)
                print(table(["check", "run 1", "run 2"], [[c, first[c], second.get(c, "-")] for c in first]))
                print()
    print("## settings\n")
    print(table(["episodes", "run", "episodes played", "s", "verdict", "same verdict and statuses"], kept))
    print(f"\nload average {load_average()} at the end")


if __name__ == "__main__":
    main()
