"""Quality reports against real servers: the templates, servers broken in one way each, one that dies mid-report,
an endpoint's pool through the API, and the CLI."""

import asyncio
import json
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from openenv.validation.report import CheckResult as ValidatorResult
from openenv.validation.types import Verdict as ValidatorVerdict

from catalog.models import EnvironmentDetail, Source
from conformance.engine import CheckResult, Outcome, Severity, Verdict, verdict_of
from conformance.quality import QualityTarget, check_quality
from conformance.quality.figures import CAPACITY_BOUND
from conformance.quality.run import DEFAULT_MAX_STEPS
from conformance.report import Figures, Report
from core.outbound import OutboundGuard
from hosting.options import ProcessOptions
from hosting.runtimes.base import LaunchSpec
from hosting.runtimes.process import ProcessRuntime
from tests import checkservers
from tests.checkservers import serve
from tests.conftest import CHECKED_TEMPLATES, wait_until
from tests.environments import write_count_env
from tests.serving import Envhub
from tests.test_cli import cli_env, run_cli

RUNTIME = ["runtime.episode_isolation", "runtime.episode_termination"]  # the hub lane's on every target
LOCAL = OutboundGuard(allow_private=True)
TEMPLATES = Path(__file__).resolve().parents[1] / "spaces_templates"


def report_of(target: QualityTarget | str, *, timeout_s: float = 5) -> Report:
    target = QualityTarget(target) if isinstance(target, str) else target
    return asyncio.run(check_quality(target, LOCAL, timeout_s=timeout_s, deadline_s=60))


def report_of_app(app: object) -> Report:
    with serve(app) as served:  # type: ignore[arg-type]
        return report_of(served.url)


def statuses(report: Report) -> dict[str, Outcome]:
    return {r.check_id: r.status for r in report.results}


@pytest.mark.parametrize("name", CHECKED_TEMPLATES)
def test_every_template_is_deterministic_isolated_and_bounded(template_urls: dict[str, str], name: str) -> None:
    # The manifest as the catalog reads it: its validation block declares the reward range the floor is judged by.
    manifest = yaml.safe_load((TEMPLATES / name / "openenv.yaml").read_text())
    report = report_of(QualityTarget(template_urls[name], manifest=manifest), timeout_s=10)
    problems = [(r.check_id, r.evidence) for r in report.results if r.status != Outcome.PASS]
    assert problems == []
    assert report.verdict == Verdict.PASS
    assert report.figures is not None
    assert set(report.figures.steps_per_s) == {"1", "8"}
    # They hold 64: the probe stops at its bound, none refused; on a loaded machine a session that answers too
    # late stops it sooner, and the report's note says so instead.
    assert not report.figures.capacity_reached
    [capacity] = [note for note in report.figures.notes if note.startswith("capacity: ")]
    at_bound = f"capacity: the probe stopped at {CAPACITY_BOUND} open sessions, none refused"
    assert (report.figures.capacity == CAPACITY_BOUND) == (capacity == at_bound), (report.figures.capacity, capacity)
    assert 1 <= (report.figures.capacity or 0) <= CAPACITY_BOUND
    assert report.figures.cold_start_from == "reset"


def test_a_deterministic_server_passes_with_figures() -> None:
    report = report_of_app(checkservers.count_app())
    assert statuses(report) == dict.fromkeys(RUNTIME, Outcome.PASS)  # a bare URL: no replicas to compare
    figures = report.figures or Figures()
    assert (figures.capacity, figures.capacity_reached) == (4, True)  # count_app holds 4 sessions
    assert figures.steps_per_s["1"] > 0 and figures.steps_per_s["8"] > 0
    assert any("ran on 4: session 5 was refused" in note for note in figures.notes)
    assert figures.memory_per_session_mb is None
    assert any("memory per session: not visible" in note for note in figures.notes)


def test_a_non_deterministic_server_is_not_judged_on_what_it_plays_beside_another() -> None:
    isolation = report_of_app(checkservers.noisy()).result("runtime.episode_isolation")
    assert isolation.status == Outcome.PASS
    assert "observations not compared" in isolation.evidence[0]


def test_sessions_that_share_state_fail_isolation() -> None:
    report = report_of_app(checkservers.shared_state())
    isolation = report.result("runtime.episode_isolation")
    assert isolation.status == Outcome.FAIL
    assert "played beside the other, differs from the same episode alone" in isolation.evidence[0]
    assert "module or class variables" in (isolation.remediation or "")
    # Alone, one session at a time, it is deterministic: only isolation fails.
    assert {c for c, s in statuses(report).items() if s == Outcome.FAIL} == {"runtime.episode_isolation"}


def test_bad_input_gets_a_reason_not_a_crash() -> None:
    unschemed = report_of_app(checkservers.missing_schema())
    for check in RUNTIME:
        result = unschemed.result(check)
        assert result.status == Outcome.SKIP
        assert result.evidence == [
            "GET /schema gave no action schema and the server lists no MCP tools: no action can be built"
        ]
        assert "GET /schema" in (result.remediation or "")

    endless = report_of_app(checkservers.endless()).result("runtime.episode_termination")
    assert endless.status == Outcome.FAIL
    assert f"had not ended after {DEFAULT_MAX_STEPS} steps" in endless.evidence[0]

    single = report_of_app(checkservers.count_app(max_sessions=1)).result("runtime.episode_isolation")
    assert single.status == Outcome.SKIP
    assert "a second session was refused at capacity" in single.evidence[0]

    gone = report_of("http://127.0.0.1:9")
    assert all(
        r.status == Outcome.ERROR and r.evidence[0].startswith("not run: the server is not up") for r in gone.results
    )
    assert gone.verdict == Verdict.FAIL


def test_a_server_that_dies_mid_report_gets_errors_and_a_verdict(tmp_path: Path) -> None:
    # The counting server exits when a step adds 7: the isolation check's first action (seeded).
    folder = write_count_env(tmp_path / "env" / "count")
    runtime = ProcessRuntime(tmp_path / "runtime")
    environment = EnvironmentDetail(id="template:count", source=Source.TEMPLATE, title="Count", path=str(folder))
    spec = LaunchSpec("dies", environment, tmp_path / "dies.log", ProcessOptions(), env={"COUNT_CRASH_AT": "7"})
    launched = runtime.start(spec, lambda _: None)
    try:
        report = report_of(launched.url)  # the report's deadline bounds it, however the server ends
    finally:
        runtime.stop(launched.handle)
    found = statuses(report)
    died = report.result("runtime.episode_isolation")
    assert died.status == Outcome.ERROR
    assert died.evidence[0].startswith("the server stopped answering: the server closed the session")
    assert "GET /health failed" in died.evidence[0]
    later = report.results[list(found).index("runtime.episode_isolation") + 1 :]
    assert later and all(r.status == Outcome.ERROR for r in later)
    assert all(
        r.evidence[0].startswith("not run: the server stopped answering during runtime.episode_isolation")
        for r in later
    )
    assert all("read its log" in (r.remediation or "") for r in [died, *later])
    assert report.verdict == Verdict.FAIL
    assert (report.figures or Figures()).notes[0].startswith("not measured: the server stopped answering")


def test_each_result_has_the_validators_fields() -> None:
    report = report_of_app(checkservers.shared_state())
    dumped = json.loads(report.model_dump_json())
    assert dumped["suite"] == "quality"
    assert [r["check_id"] for r in dumped["results"]] == RUNTIME
    validator_fields = {"check_id", "status", "measured", "evidence", "remediation", "duration_s"}
    for result in dumped["results"]:
        # openenv's own model of a result (extra fields forbidden) reads its fields of ours
        ValidatorResult.model_validate({k: v for k, v in result.items() if k in validator_fields})
        assert result["status"] in {"pass", "fail", "skip", "error"}
        assert result["level"] == "runtime" and result["severity"] == "fail"
        assert all(isinstance(line, str) and len(line) < 400 for line in result["evidence"])
    assert dumped["verdict"] in {v.value for v in ValidatorVerdict}
    assert Report.model_validate(dumped) == report  # a stored report reads back whole


def test_the_verdict_follows_the_validators_policy() -> None:
    def result(status: Outcome, severity: Severity = Severity.FAIL) -> CheckResult:
        return CheckResult(check_id="hub.cross_host_determinism", status=status, severity=severity)

    assert verdict_of([result(Outcome.PASS)]) == Verdict.PASS
    assert verdict_of([result(Outcome.SKIP)]) == Verdict.WARN
    assert verdict_of([result(Outcome.SKIP)], skip_warns=False) == Verdict.PASS  # the checklist's "does not apply"
    assert verdict_of([result(Outcome.FAIL, Severity.WARN)]) == Verdict.WARN
    assert verdict_of([result(Outcome.FAIL)]) == Verdict.FAIL
    assert verdict_of([result(Outcome.ERROR)]) == Verdict.FAIL


def test_a_quality_report_of_a_pool_is_filed_through_the_api(count_template: str, envhub: Envhub) -> None:
    endpoint = envhub.running(count_template, options={"replicas": 2})
    wait_until(lambda: len(envhub.ready_replicas(endpoint["id"])) == 2, timeout_s=60)
    response = envhub.http.post("/api/checks", json={"endpoint": endpoint["id"], "suite": "quality"}, timeout=90)
    assert response.status_code == 201, response.text
    filed = response.json()
    environment = envhub.http.get(f"/api/environments/{count_template}").json()
    assert (filed["suite"], filed["environment"], filed["endpoint"]) == ("quality", count_template, endpoint["id"])
    report = Report.model_validate(filed["report"])
    assert filed["verdict"] == report.verdict
    assert environment["sha"] is not None
    assert report.revision == environment["sha"]
    hosts = report.result("hub.cross_host_determinism")
    assert (hosts.status, hosts.level) == (Outcome.PASS, "hub")
    replicas = sorted(r["id"] for r in envhub.ready_replicas(endpoint["id"]))
    assert sorted(hosts.measured["replicas"]) == replicas
    assert [r.check_id for r in report.results] == [*RUNTIME, "hub.cross_host_determinism"]
    figures = report.figures or Figures()
    assert figures.cold_start_from == "launch" and figures.cold_start_s is not None
    assert figures.memory_per_session_mb is not None  # process servers: envhub reads their memory

    assert environment["quality"]["report_id"] == filed["id"]
    assert (environment["quality"]["verdict"], environment["quality"]["revision"]) == ("pass", environment["sha"])
    assert environment["quality"]["failing"] == []
    assert envhub.http.get(f"/api/checks/{filed['id']}").json() == filed
    protocol = envhub.http.post("/api/checks", json={"endpoint": endpoint["id"]}, timeout=60).json()
    assert (protocol["suite"], protocol["verdict"]) == ("protocol", "pass")
    listed = envhub.http.get("/api/checks", params={"endpoint": endpoint["id"], "suite": "quality"}).json()
    assert (listed["count"], listed["data"][0]["id"]) == (1, filed["id"])
    both = envhub.http.get("/api/checks", params={"endpoint": endpoint["id"]}).json()
    assert [r["suite"] for r in both["data"]] == ["protocol", "quality"]  # newest first


def test_a_template_is_reported_on_once_launched(count_template: str, client: TestClient) -> None:
    response = client.post("/api/checks", json={"environment": count_template, "suite": "quality"})
    assert response.status_code == 422
    assert response.json()["code"] == "not_launched"
    assert client.post("/api/checks", json={"url": "http://x", "suite": "nope"}).status_code == 422
    # The hosted configuration refuses private addresses for quality reports as for checks.
    refused = client.post("/api/checks", json={"url": "http://127.0.0.1:9", "suite": "quality"})
    assert refused.status_code == 422
    assert refused.json()["code"] == "refused_url"
    assert client.get("/api/checks", params={"suite": "quality"}).json() == {"data": [], "count": 0}


@pytest.mark.slow  # the CLI's own interpreter and servers; the API's report is in the default run
def test_the_cli_prints_a_table_and_json(tmp_path: Path) -> None:
    env = cli_env(tmp_path, "http://127.0.0.1:9")
    with serve(checkservers.shared_state()) as served:
        table = run_cli(env, "check", served.url, "--suite", "quality")
        assert table.returncode == 1, table.stdout + table.stderr  # a fail verdict, as openenv validate exits
    assert f"{served.url}: quality report" in table.stdout
    assert "runtime.episode_termination     pass" in table.stdout
    assert "runtime.episode_isolation       FAIL" in table.stdout
    assert "↳ fix: keep all episode state on the Environment instance" in table.stdout
    assert "steps/s at 8 session(s)" in table.stdout
    assert table.stdout.rstrip().splitlines()[-1].startswith("verdict: FAIL, in ")
    with serve(checkservers.count_app()) as served:
        printed = run_cli(env, "check", served.url, "--suite", "quality", "--json")
    assert printed.returncode == 0, printed.stderr
    report = json.loads(printed.stdout)
    assert (report["suite"], report["verdict"]) == ("quality", "pass")
    assert {"check_id", "status", "measured", "evidence", "remediation", "duration_s"} <= set(report["results"][0])
