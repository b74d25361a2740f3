"""openenv's own validator run by envhub: its reports filed unchanged per revision, equal to what `openenv
validate --json` prints, shown on the API, the CLI and the page; hostile folders refused with a code."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from tests.conftest import ADMIN_TOKEN, wait_until
from tests.serving import TEMPLATES, Envhub
from tests.test_cli import cli_env, run_cli

OPENENV = str(Path(sys.executable).parent / "openenv")

# The manifest `openenv init` writes: a `validation:` block openenv's static level accepts.
VALID_MANIFEST = """spec_version: 1
name: valid
version: 0.1.0
type: space
runtime: fastapi
app: server.app:app
port: 8000
validation:
  reward: {range: [0.0, 1.0], oracle_tolerance: 0.0, floor_margin: 0.1}
  resources: {cpu: 1.0, memory_mb: 1024, disk_mb: 512, episode_timeout_s: 60.0}
  capabilities: {verifier: {kind: reward_channel}}
  types: {tags: [demo]}
"""


def untimed(value: Any) -> Any:
    """The report without its clock readings: each check's `duration_s`."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k != "duration_s"}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def openenv_validate(*args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([OPENENV, "validate", *args, "--json"], capture_output=True, text=True, timeout=120)
    return done.returncode, json.loads(done.stdout)


@pytest.fixture
def extra(tmp_path: Path) -> Path:
    """Template folders of the test's own beside the built-in ones: one with a valid manifest, and hostile ones."""
    root = tmp_path / "extra"
    (root / "valid").mkdir(parents=True)
    (root / "valid" / "openenv.yaml").write_text(VALID_MANIFEST)
    (root / "valid" / "README.md").write_text("# valid\n")
    (root / "nomanifest").mkdir()
    (root / "nomanifest" / "README.md").write_text("# no openenv.yaml here\n")
    (root / "huge").mkdir()
    (root / "huge" / "openenv.yaml").write_text("name: huge\n" + "# padding\n" * 20_000)
    (root / "broken").mkdir()
    (root / "broken" / "openenv.yaml").write_text("name: [unclosed\n")
    return root


@pytest.fixture
def envhub(settings: Settings, tmp_path: Path, extra: Path) -> Any:
    served = Envhub(
        settings.model_copy(
            update={"templates_dir": TEMPLATES, "extra_templates": str(extra), "data_dir": tmp_path / "data"}
        )
    )
    yield served
    served.stop()


def test_a_templates_filed_report_is_what_openenv_validate_prints(envhub: Envhub) -> None:
    filed = envhub.http.post("/api/environments/template:wordle/validation", json={"level": "static"})
    assert filed.status_code == 201, filed.text
    body = filed.json()
    environment = envhub.http.get("/api/environments/template:wordle").json()
    assert (body["suite"], body["environment"], body["revision"]) == ("openenv", "template:wordle", environment["sha"])
    assert body["tool"] == "openenv 0.10.0"
    report = body["report"]
    # The built-ins declare openenv's second manifest schema (an `execution:` block), and pass.
    assert (report["report_schema_version"], report["policy_version"], report["verdict"]) == ("2", "v1", "pass")
    assert len(report["source_digest"]) == 64 and body["verdict"] == report["verdict"]

    code, printed = openenv_validate(str(TEMPLATES / "wordle"), "--level", "static", "--skip-build")
    assert untimed(report) == untimed(printed)
    assert report["target"] == str(TEMPLATES / "wordle")
    assert code == (1 if report["verdict"] == "fail" else 0)

    assert envhub.http.get(f"/api/validation/{body['id']}").json() == body
    listed = envhub.http.get("/api/environments/template:wordle/validation").json()
    assert (listed["count"], listed["data"][0]) == (1, body)
    assert envhub.http.get("/api/validation/999999").json()["code"] == "validation_not_found"


def test_a_level_it_cannot_run_shows_the_validators_named_skips(envhub: Envhub, extra: Path) -> None:
    filed = envhub.http.post("/api/environments/template:valid/validation", json={"level": "runtime"})
    assert filed.status_code == 201, filed.text
    report = filed.json()["report"]
    # No `execution:` block: nothing to build or run, whether or not a Docker engine answers here.
    assert report["policy_version"] == "v2" and report["verdict"] == "warn"
    deeper = [r for r in report["results"] if not r["check_id"].startswith("static.")]
    assert deeper, report["results"]
    assert {r["status"] for r in deeper} == {"skip"}
    assert all(r["evidence"] for r in deeper)  # each skip names its reason


def test_hostile_folders_are_refused_with_a_code_and_nothing_filed(envhub: Envhub, extra: Path) -> None:
    missing = envhub.http.post("/api/environments/template:nomanifest/validation")
    assert (missing.status_code, missing.json()["code"]) == (422, "validation_unsupported_package")
    huge = envhub.http.post("/api/environments/template:huge/validation")
    assert (huge.status_code, huge.json()["code"]) == (413, "validation_manifest_too_large")
    for name in ("nomanifest", "huge"):
        assert envhub.http.get(f"/api/environments/template:{name}/validation").json()["count"] == 0
    unknown = envhub.http.post("/api/environments/nobody/nothing/validation")
    assert unknown.status_code == 404
    level = envhub.http.post("/api/environments/template:wordle/validation", json={"level": "deep"})
    assert level.status_code == 422

    # A manifest that is not YAML is the validator's own finding: its report is filed as it gave it.
    broken = envhub.http.post("/api/environments/template:broken/validation")
    assert broken.status_code == 201, broken.text
    report = broken.json()["report"]
    assert [(r["check_id"], r["status"]) for r in report["results"]] == [("static.manifest", "fail")]
    assert broken.json()["verdict"] == "fail"
    _, printed = openenv_validate(str(extra / "broken"), "--level", "static", "--skip-build")
    assert untimed(report) == untimed(printed)


def test_a_running_servers_report_is_what_openenv_validate_url_prints(
    settings: Settings, tmp_path: Path, extra: Path
) -> None:
    envhub = Envhub(
        settings.model_copy(
            update={"templates_dir": TEMPLATES, "data_dir": tmp_path / "data", "allow_private_urls": True}
        )
    )
    try:
        url = envhub.running("template:wordle")["url"]
        filed = envhub.http.post("/api/environments/template:wordle/validation", json={"url": url})
        assert filed.status_code == 201, filed.text
        body = filed.json()
        code, printed = openenv_validate("--url", url)
        assert body["report"] == printed
        assert body["suite"] == "openenv-url"
        assert body["verdict"] == ("pass" if printed["passed"] else "fail") and code == (0 if printed["passed"] else 1)

        # Kept beside the folder's report, never mixed with it.
        envhub.http.post("/api/environments/template:wordle/validation")
        listed = envhub.http.get("/api/environments/template:wordle/validation").json()
        assert sorted(r["suite"] for r in listed["data"]) == ["openenv", "openenv-url"]
        only = envhub.http.get("/api/environments/template:wordle/validation", params={"suite": "openenv-url"})
        assert [r["id"] for r in only.json()["data"]] == [body["id"]]
    finally:
        envhub.end_endpoints()
        envhub.stop()


def test_with_sign_in_on_an_anonymous_caller_may_not_run_the_validator(settings: Settings, tmp_path: Path) -> None:
    envhub = Envhub(
        settings.model_copy(update={"templates_dir": TEMPLATES, "data_dir": tmp_path / "data", "dev_login": True})
    )
    try:
        refused = envhub.http.post("/api/environments/template:wordle/validation")
        assert (refused.status_code, refused.json()["code"]) == (401, "sign_in_required")
        assert envhub.http.get("/api/environments/template:wordle/validation").json()["count"] == 0
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        allowed = envhub.http.post("/api/environments/template:wordle/validation", headers=admin)
        assert allowed.status_code == 201, allowed.text
    finally:
        envhub.stop()


def test_each_new_revision_is_validated_by_itself_and_older_reports_stay(
    settings: Settings, tmp_path: Path, extra: Path
) -> None:
    own = tmp_path / "own"
    (own / "valid").mkdir(parents=True)
    (own / "valid" / "openenv.yaml").write_text(VALID_MANIFEST)
    configured = settings.model_copy(
        update={"extra_templates": str(own), "data_dir": tmp_path / "data", "validator_interval_s": 0.2}
    )

    def reports(envhub: Envhub) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = envhub.http.get("/api/environments/template:valid/validation").json()["data"]
        return data

    first = Envhub(configured)
    try:
        wait_until(lambda: len(reports(first)) == 1, timeout_s=60)
        old = reports(first)[0]
    finally:
        first.stop()
    (own / "valid" / "openenv.yaml").write_text(VALID_MANIFEST.replace("0.1.0", "0.2.0"))
    second = Envhub(configured)
    try:
        wait_until(lambda: len(reports(second)) == 2, timeout_s=60)
        new, kept = reports(second)
        assert kept == old
        assert new["revision"] != old["revision"]
        assert new["revision"] == second.http.get("/api/environments/template:valid").json()["sha"]
        assert new["report"]["levels_run"] == [1] and new["verdict"] == new["report"]["verdict"]
        assert second.http.get(f"/api/validation/{old['id']}").json() == old
    finally:
        second.stop()


@pytest.mark.timeout(300)  # three commands that each import openenv, on a machine that may be busy
def test_the_cli_prints_openenvs_report_and_exits_as_it_does(tmp_path: Path, extra: Path) -> None:
    env = cli_env(tmp_path, "http://127.0.0.1:9") | {"ENVHUB_TEMPLATES_DIR": str(TEMPLATES)}
    ours = run_cli(env, "validate", "wordle", "--level", "static", "--json")
    code, printed = openenv_validate(str(TEMPLATES / "wordle"), "--level", "static", "--skip-build")
    assert ours.returncode == code, ours.stderr
    assert untimed(json.loads(ours.stdout)) == untimed(printed)

    assert run_cli(env, "validate", str(extra / "nomanifest")).returncode == 2  # openenv's unsupported package
