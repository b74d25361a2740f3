"""python -m app check, run as a user runs it: a real subprocess against real servers."""

import json
from pathlib import Path

from tests import checkservers
from tests.checkservers import serve
from tests.test_cli import cli_env, run_cli


def test_a_conforming_server_exits_0_with_a_table(tmp_path: Path) -> None:
    with serve(checkservers.count_app()) as served:
        done = run_cli(cli_env(tmp_path, "http://127.0.0.1:9"), "check", served.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{served.url}: openenv 0.10, simulation mode, Task API name 'count'" in done.stdout
    assert "1    core  pass" in done.stdout
    assert "\nconforms: " in done.stdout
    assert "HTTP Request" not in done.stderr  # no log line per request


def test_json_is_the_report(tmp_path: Path) -> None:
    with serve(checkservers.legacy_server()) as served:
        done = run_cli(cli_env(tmp_path, "http://127.0.0.1:9"), "check", served.url, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["verdict"] != "fail"  # it conforms: warnings at most
    assert report["profile"]["generation"] == "older"
    assert {c["check_id"]: c["status"] for c in report["results"]}["34"] == "skip"
    assert set(report["results"][0]) == {
        "check_id", "title", "level", "severity", "status", "measured", "evidence", "remediation", "duration_s",
    }  # fmt: skip


def test_a_failing_core_check_exits_1_and_says_why(tmp_path: Path) -> None:
    with serve(checkservers.wrong_health()) as served:
        done = run_cli(cli_env(tmp_path, "http://127.0.0.1:9"), "check", served.url, "--timeout", "2")
    assert done.returncode == 1
    assert "1    core  FAIL" in done.stdout
    assert '↳ GET /health answered {"status": "ok"}' in done.stdout
    assert "does NOT conform" in done.stdout


def test_warnings_do_not_change_the_exit_code(tmp_path: Path) -> None:
    with serve(checkservers.forgets_episode_id()) as served:
        done = run_cli(cli_env(tmp_path, "http://127.0.0.1:9"), "check", served.url)
    assert done.returncode == 0, done.stdout
    assert "16   warn  FAIL" in done.stdout
    assert "1 warnings" in done.stdout


def test_public_only_refuses_private_addresses(tmp_path: Path) -> None:
    done = run_cli(cli_env(tmp_path, "http://127.0.0.1:9"), "check", "http://127.0.0.1:9", "--public-only")
    assert done.returncode == 1
    assert "loopback" in done.stderr
    done = run_cli(cli_env(tmp_path, "http://127.0.0.1:9"), "check", "file:///etc/passwd")
    assert done.returncode == 1
    assert "only http:// and https://" in done.stderr


def test_a_url_where_nothing_listens_is_one_line(tmp_path: Path) -> None:
    with serve(checkservers.count_app()) as served:
        url = served.url  # a port that was just let go: nothing listens there now
    for suite in ("protocol", "quality"):
        done = run_cli(cli_env(tmp_path, "http://127.0.0.1:9"), "check", url, "--suite", suite)
        assert done.returncode == 1
        assert done.stdout == ""
        said = f"envhub: nothing answers at {url}: the connection was refused. Is the server running, at this host "
        assert done.stderr.strip() == said + "and port?"
