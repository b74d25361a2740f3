"""The statistical lane end to end: environments with known statistics, launched by a real envhub, played by the
reference players (the baselines, the adversarial panel, a model preset behind a fake chat-completions server) as
evaluations through the gateway; each gets the verdict it deserves, with evidence whose episodes replay."""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from app.settings import REPO_ROOT, Settings
from conformance.models import CheckReport
from conformance.report import Report, RunStatus, Suite
from conformance.statistical.figures import signal
from conformance.statistical.report import StatisticalRun
from core.clock import utcnow
from core.db import create_db_engine
from tests.conftest import wait_until
from tests.fakehub import FakeHub
from tests.fakemodel import FakeModel, Reply
from tests.serving import Envhub
from tests.statenvs import RULES, write_stat_env

SETTINGS = {"statistical_episodes": 4, "statistical_k": 4, "statistical_group_size": 4, "statistical_replays": 1}


@pytest.fixture(scope="module")
def teaching_hub() -> Iterator[FakeHub]:
    """The Hub the tasks that teach are pushed to."""
    with FakeHub() as hub:
        yield hub


@pytest.fixture(scope="module")
def lane(tmp_path_factory: pytest.TempPathFactory, teaching_hub: FakeHub) -> Iterator[Envhub]:
    """envhub with one environment of each known kind, a model preset `one` that always plays x = 1."""
    root = tmp_path_factory.mktemp("statistical")
    for rule in RULES:
        write_stat_env(root / "envs" / rule, rule)
    model = FakeModel(lambda body: Reply(text='{"x": 1}'))
    server = Envhub(
        Settings(
            database_url=f"sqlite:///{root}/envhub.db",
            data_dir=root / "data",
            templates_dir=root / "none",
            extra_templates=str(root / "envs"),
            hf_endpoint=teaching_hub.url,
            sync_interval_s=0,
            allow_private_urls=True,
            max_endpoints_per_owner=10,
        ).model_copy(update=SETTINGS)
    )
    saved = server.http.put("/api/models/one", json={"base_url": model.url, "model": "one"})
    assert saved.status_code in (200, 201), saved.text
    yield server
    server.end_endpoints()
    server.stop()
    model.close()


def report_of(lane: Envhub, rule: str, **body: Any) -> dict[str, Any]:
    endpoint = lane.running(f"template:{rule}")
    started = lane.http.post("/api/statistics", json={"endpoint": endpoint["id"], **body})
    assert started.status_code == 202, started.text
    report_id = started.json()["id"]
    assert started.json()["report"]["status"] == "running"
    wait_until(
        lambda: lane.http.get(f"/api/statistics/{report_id}").json()["report"]["status"] != "running", timeout_s=180
    )
    filed: dict[str, Any] = lane.http.get(f"/api/statistics/{report_id}").json()
    assert filed["report"]["status"] == "finished", filed["report"]["message"]
    assert filed["suite"] == "statistical" and filed["report"]["statistics"]["policy_version"] == "statistical-v1"
    return filed


def results(filed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["check_id"]: r for r in filed["report"]["results"]}


def replays(lane: Envhub, result: dict[str, Any]) -> None:
    """The evidence's episodes open through the API, with their steps."""
    assert result["measured"]["episodes"], result
    for episode_id in result["measured"]["episodes"]:
        episode = lane.http.get(f"/api/evaluations/episodes/{episode_id}")
        assert episode.status_code == 200, episode.text
        assert episode.json()["records"][0]["kind"] == "reset"


def test_a_constant_reward_gives_no_training_signal(lane: Envhub) -> None:
    filed = report_of(lane, "constant", presets=["one"])
    found = results(filed)
    signal_result = found["statistical.training_signal"]
    assert signal_result["status"] == "fail"
    assert signal_result["measured"]["share_of_groups"] == 0
    assert found["statistical.difficulty_separation"]["status"] == "fail"
    assert filed["verdict"] == "fail"
    replays(lane, found["statistical.adversarial_floor"])


def test_a_reward_for_the_empty_action_is_gameable(lane: Envhub) -> None:
    filed = report_of(lane, "gameable")
    found = results(filed)
    floor = found["statistical.adversarial_floor"]
    assert floor["status"] == "fail" and floor["measured"]["means"]["adversarial:empty"] == 1.0
    assert found["statistical.gameability_gap"]["status"] == "fail"
    assert found["statistical.training_signal"]["status"] == "skip"  # no model was picked
    assert filed["verdict"] == "fail"
    replays(lane, floor)


def test_a_reward_that_ignores_the_seed_fails_the_variance_bound(lane: Envhub) -> None:
    filed = report_of(lane, "seedless")
    variance = results(filed)["statistical.variance_bound"]
    assert variance["status"] == "fail" and variance["measured"]["largest_difference"] > 0
    assert filed["verdict"] == "fail"
    replays(lane, variance)


def test_an_unreachable_maximum_fails_reachability(lane: Envhub) -> None:
    filed = report_of(lane, "unreachable", presets=["one"])
    reach = results(filed)["statistical.reward_reachability"]
    assert reach["status"] == "fail"
    assert (reach["measured"]["best_reward"], reach["measured"]["declared_max"]) == (0.5, 1.0)
    assert filed["verdict"] == "fail"
    replays(lane, reach)


@pytest.fixture(scope="module")
def known_rates(lane: Envhub) -> dict[str, Any]:
    return report_of(lane, "known_rates", presets=["one"])


def test_a_known_pass_rate_per_task_gives_the_signal_the_formula_gives(
    lane: Envhub, known_rates: dict[str, Any]
) -> None:
    filed = known_rates
    result = results(filed)["statistical.training_signal"]
    group = SETTINGS["statistical_group_size"]
    rates = {"seed:0": 0.0, "seed:1": 1.0, "seed:2": 0.5, "seed:3": 0.25}
    per_task = {t["task"]: t for t in result["measured"]["per_task"]}
    assert {task: t["pass_rate"] for task, t in per_task.items()} == rates
    for task, p in rates.items():
        low, high = per_task[task]["p_signal_interval"]
        assert per_task[task]["p_signal"] == pytest.approx(signal(p, group))
        assert low <= signal(p, group) <= high
    assert result["measured"]["tasks_with_signal"] == 2
    assert result["status"] == "pass"
    # Difficulty per task is stored, exported with RFC 013's keys, and the tasks that teach come first by P(signal).
    tasks = lane.http.get(f"/api/statistics/{filed['id']}/tasks").json()["tasks"]
    assert {t["id"]: t["difficulty"] for t in tasks} == {task: 1 - p for task, p in rates.items()}
    teaching = lane.http.get(f"/api/statistics/{filed['id']}/teaching").json()
    assert teaching["resets"] == [{"seed": 2}, {"seed": 3}]
    model_run = result["measured"]["evaluations"][0]
    exported = lane.http.get(f"/api/evaluations/{model_run}/result").json()
    assert exported["success_rate"] == pytest.approx(sum(rates.values()) / 4)
    assert set(exported) >= {"mean_reward", "pass@k", "error_rate", "by_difficulty", "per_task", "reproducible"}
    assert json.dumps(exported)


def test_the_lanes_runs_are_marked_and_stay_off_the_leaderboard(lane: Envhub, known_rates: dict[str, Any]) -> None:
    played = {p["evaluation"] for p in known_rates["report"]["statistics"]["players"]}
    assert len(played) >= 8  # two baselines, the panel, the model
    for evaluation in played:
        assert lane.http.get(f"/api/evaluations/{evaluation}").json()["statistical_report"] == known_rates["id"]
    # A user's own run of the same environment is ranked; the lane's are not.
    endpoint = lane.running("template:known_rates")
    mine = lane.http.post("/api/evaluations", json={"endpoint": endpoint["id"], "policy": "random", "episodes": 2})
    assert mine.status_code == 201, mine.text
    wait_until(lambda: lane.http.get(f"/api/evaluations/{mine.json()['id']}").json()["status"] == "finished")
    board = lane.http.get("/api/environments/template:known_rates/leaderboard").json()
    ranked = {row["evaluation"] for group in board["groups"] for row in group["rows"]}
    assert ranked == {mine.json()["id"]}


def test_a_report_left_running_by_a_stopped_envhub_is_failed_when_envhub_starts(tmp_path: Path) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/envhub.db",
        data_dir=tmp_path / "data",
        templates_dir=tmp_path / "none",
        hf_endpoint="http://127.0.0.1:9",
        sync_interval_s=0,
    )
    first = Envhub(settings)
    instance = first.services.leases.instance
    first.stop()
    left = Report(
        suite=Suite.STATISTICAL,
        target="http://127.0.0.1:9/gone",
        environment="template:gone",
        checked_at=utcnow(),
        duration_s=0,
        results=(),
        status=RunStatus.RUNNING,
        statistics=StatisticalRun(policy_version="statistical-v1", instance=instance),
    )
    with Session(create_db_engine(settings.database_url)) as session:
        row = CheckReport(url=left.target, suite=Suite.STATISTICAL.value, report=left.model_dump(mode="json"))
        session.add(row)
        session.commit()
        report_id = row.id
    again = Envhub(settings)
    try:
        filed = again.http.get(f"/api/statistics/{report_id}").json()
        assert (filed["report"]["status"], filed["report"]["code"]) == ("failed", "interrupted")
        assert filed["verdict"] == "fail"
        assert filed["report"]["message"]
    finally:
        again.stop()


def cli_env(tmp_path: Path) -> dict[str, str]:
    """The command's environment: its own catalog, the gameable environment as its only one, small settings."""
    write_stat_env(tmp_path / "envs" / "gameable", "gameable")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVHUB_", "HF_"))}
    return (
        env
        | {
            "ENVHUB_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
            "ENVHUB_DATA_DIR": str(tmp_path / "data"),
            "ENVHUB_TEMPLATES_DIR": str(tmp_path / "none"),
            "ENVHUB_EXTRA_TEMPLATES": str(tmp_path / "envs"),
            "ENVHUB_QUALITY_INTERVAL_S": "0",
            "HF_ENDPOINT": "http://127.0.0.1:9",
        }
        | {f"ENVHUB_{key.upper()}": str(value) for key, value in SETTINGS.items()}
    )


def statistics_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "app", "statistics", "template:gameable", *args]
    return subprocess.run(command, cwd=REPO_ROOT, env=cli_env(tmp_path), capture_output=True, text=True, timeout=300)


def test_the_cli_prints_the_report_and_exits_1_on_a_fail(tmp_path: Path) -> None:
    table = statistics_cli(tmp_path)
    assert table.returncode == 1, table.stderr
    for check_id in ("reward_reachability", "adversarial_floor", "gameability_gap", "training_signal"):
        assert f"statistical.{check_id}" in table.stdout
    assert "fix:" in table.stdout and "verdict: FAIL" in table.stdout


@pytest.mark.slow
def test_the_cli_prints_the_filed_report_as_json(tmp_path: Path) -> None:
    printed = statistics_cli(tmp_path, "--json")
    assert printed.returncode == 1, printed.stderr
    filed = json.loads(printed.stdout)
    assert filed["suite"] == "statistical" and filed["verdict"] == "fail"
    assert len(filed["report"]["results"]) == 7
    floor = next(r for r in filed["report"]["results"] if r["check_id"] == "statistical.adversarial_floor")
    assert floor["status"] == "fail" and floor["remediation"]


def test_the_tasks_that_teach_are_pushed_as_a_hub_dataset(
    lane: Envhub, known_rates: dict[str, Any], teaching_hub: FakeHub
) -> None:
    path = f"/api/statistics/{known_rates['id']}/teaching/push"
    anonymous = lane.http.post(path, json={"repo": "alice/teach"})
    assert anonymous.status_code == 403 and anonymous.json()["code"] == "forbidden"
    pushed = lane.http.post(path, json={"repo": "alice/teach"}, headers={"Authorization": "Bearer hf_test"})
    assert pushed.status_code == 200, pushed.text
    files = teaching_hub.files("alice/teach", repo_type="dataset")
    tasks = [json.loads(line) for line in files["data/tasks.jsonl"].decode().splitlines()]
    assert [t["reset"] for t in tasks] == [{"seed": 2}, {"seed": 3}]  # 0 < p < 1, the most signal first
    assert [t["difficulty"] for t in tasks] == [0.5, 0.75]
    assert tasks[0]["p_signal"] > tasks[1]["p_signal"]
    assert "data_files: data/tasks.jsonl" in files["README.md"].decode()
