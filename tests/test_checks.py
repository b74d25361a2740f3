"""The conformance checker against real servers: the templates, an older server and broken ones."""

import asyncio
import time

import pytest
from fastapi import FastAPI

from conformance import Outcome, Report, ServerProfile, check_url
from core.outbound import OutboundGuard
from tests import checkservers
from tests.checkservers import serve
from tests.conftest import CHECKED_TEMPLATES

WS_CHECKS = {"13", "14", "15", "16", "17", "18", "19", "20", "21", "22", "23", "24", "25", "26", "32", "33"}
LOCAL = OutboundGuard(allow_private=True)


def check(url: str, *, timeout_s: float = 2, deadline_s: float = 30) -> Report:
    return asyncio.run(check_url(url, LOCAL, timeout_s=timeout_s, deadline_s=deadline_s))


def profile(report: Report) -> ServerProfile:
    assert report.profile is not None
    return report.profile


def outcomes(report: Report, outcome: Outcome) -> set[str]:
    return {c.check_id for c in report.results if c.status == outcome}


def check_app(app: FastAPI | object, **options: float) -> Report:
    with serve(app) as served:  # type: ignore[arg-type]
        started = time.monotonic()
        report = check(served.url, **options)
        assert time.monotonic() - started < 15, "the check took too long"
        return report


@pytest.mark.parametrize("name", CHECKED_TEMPLATES)
def test_every_template_passes_every_core_check(template_urls: dict[str, str], name: str) -> None:
    report = check(template_urls[name], timeout_s=10)
    problems = [
        f"{c.check_id} {c.status}: {c.message}" for c in report.results if c.status in (Outcome.FAIL, Outcome.ERROR)
    ]
    assert problems == []
    assert report.conforms
    assert report.core_passed == report.core_total >= 28
    assert profile(report).generation == "0.10"
    assert profile(report).mode == "simulation"


def test_template_facts_reach_the_report(template_urls: dict[str, str]) -> None:
    toolbox = check(template_urls["toolbox"], timeout_s=10)
    assert profile(toolbox).mcp_tools == 5
    assert "get_question" in toolbox.result("17").message  # the episode's action is a tool call
    arithmetic = check(template_urls["arithmetic_tasks"], timeout_s=10)
    assert arithmetic.result("36").status == Outcome.PASS
    assert profile(arithmetic).env_name == "arithmetic_tasks"


def test_a_healthy_server_conforms_with_evidence() -> None:
    report = check_app(checkservers.count_app())
    assert report.conforms, report.failing
    health = report.result("1")
    assert health.level == "core"
    [first, *_] = health.measured["exchanges"]
    assert first["sent"] == "GET /health"
    assert '"healthy"' in first["received"]
    assert health.duration_s > 0
    # two sessions allowed: isolation is checked, the limit is not probed
    assert report.result("23").status == Outcome.PASS
    assert report.result("22").status == Outcome.SKIP


def test_a_one_session_server_shows_its_capacity_limit() -> None:
    report = check_app(checkservers.count_app(max_sessions=1))
    assert report.conforms, report.failing
    assert report.result("22").status == Outcome.PASS
    assert report.result("23").status == Outcome.SKIP
    assert profile(report).max_sessions == 1


def test_an_older_server_conforms_with_skips() -> None:
    report = check_app(checkservers.legacy_server())
    assert report.conforms, [(c.check_id, c.message) for c in report.results if c.check_id in report.failing]
    assert {"3b", "33", "34", "35", "36"} <= outcomes(report, Outcome.SKIP)
    assert profile(report).generation == "older"
    assert "older server" in report.result("8").message


def test_a_production_server_skips_http_control() -> None:
    report = check_app(checkservers.count_app(mode="production"))
    assert report.conforms, report.failing
    assert {"8", "9", "10", "11"} <= outcomes(report, Outcome.SKIP)
    assert profile(report).mode == "production"


@pytest.mark.parametrize(
    ("server", "failed"),
    [
        (checkservers.wrong_health, {"1"}),
        (checkservers.missing_schema, {"3"}),
        (checkservers.invalid_schema, {"3"}),
        (checkservers.ws_silent, {"14"}),
        (checkservers.ws_closes_early, {"14"}),
        (checkservers.ws_huge_frame, {"14"}),
        (checkservers.mcp_bad_errors, {"27", "28", "29", "30", "33"}),
        (checkservers.huge_metadata, {"2"}),
    ],
)
def test_a_broken_server_fails_exactly_what_it_breaks(server: object, failed: set[str]) -> None:
    # A roomy deadline per request: on a loaded machine a sound route must not fail beside the broken one.
    report = check_app(server(), timeout_s=5)  # type: ignore[operator]
    assert outcomes(report, Outcome.FAIL) == failed, [
        (c.check_id, c.message) for c in report.results if c.status == "fail"
    ]
    assert not report.conforms
    # what could not be checked because of the break is reported as not run, never as passed
    for result in report.results:
        if result.status == Outcome.ERROR:
            assert result.message.startswith("not run"), (result.check_id, result.message)


def test_the_reasons_say_what_broke() -> None:
    assert "{'status': 'ok'}" in check_app(checkservers.wrong_health()).result("1").message.replace('"', "'")
    assert "integr" in check_app(checkservers.invalid_schema()).result("3").message
    silent = check_app(checkservers.ws_silent())
    assert "within 2 s" in silent.result("14").message
    assert "not run: WS /ws did not send" in silent.result("15").message
    assert "1024 KiB" in check_app(checkservers.huge_metadata()).result("2").message
    assert "1024 KiB" in check_app(checkservers.ws_huge_frame()).result("14").message


def test_an_environment_that_fails_a_valid_action_is_said_to_have_failed_with_its_answer() -> None:
    report = check_app(checkservers.failing_steps())
    step = report.result("17")
    assert step.status == Outcome.FAIL
    assert step.message.startswith('the environment\'s server failed on {"add": 0}, an action its schema allows')
    assert step.message.endswith("it answered EXECUTION_ERROR: the counter is jammed")
    exchanges = step.measured["exchanges"]
    answered = [e["received"] for e in exchanges if e["sent"].startswith('WS A ← {"type": "step"')]
    assert answered and "the counter is jammed" in answered[0]
    assert report.result("21").status == Outcome.PASS  # the error is reported as such, and the session goes on


def test_garbage_over_the_websocket_fails_only_websocket_checks() -> None:
    report = check_app(checkservers.ws_garbage())
    failed = outcomes(report, Outcome.FAIL)
    assert {"14", "15", "17", "18", "19", "20"} <= failed <= WS_CHECKS
    assert "not JSON" in report.result("14").message
    for http_check in ("1", "2", "3", "6", "8", "27", "30", "34", "32b"):
        assert report.result(http_check).status == Outcome.PASS


def test_an_episode_id_echo_is_a_warning_that_does_not_break_conformance() -> None:
    report = check_app(checkservers.forgets_episode_id())
    assert outcomes(report, Outcome.FAIL) == {"16"}
    assert report.result("16").level == "warn"
    assert report.conforms
    assert report.warnings == ["16"]


def test_the_total_deadline_bounds_a_server_that_never_answers() -> None:
    with serve(checkservers.ws_silent()) as served:
        started = time.monotonic()
        report = check(served.url, timeout_s=5, deadline_s=1.5)
        assert time.monotonic() - started < 4
    assert report.result("1").status == Outcome.PASS
    late = [c for c in report.results if c.message.startswith("not run: the deadline passed")]
    assert late, "checks after the deadline are reported as not run"
    assert not report.conforms


def test_a_server_that_is_not_there_fails_fast() -> None:
    with serve(checkservers.count_app()) as served:
        url = served.url
    started = time.monotonic()
    report = check(url)
    assert time.monotonic() - started < 10
    assert report.result("1").status == Outcome.FAIL
    assert "ConnectError" in report.result("1").message
