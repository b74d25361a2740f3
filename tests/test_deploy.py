"""`python -m app deploy` against the fake Hub: the files a Space gets, its card, variables and secrets."""

import re
from pathlib import Path

import pytest
import yaml
from huggingface_hub import HfApi, SpaceCard

from app.cli import main
from app.settings import REPO_ROOT
from app.usecases.deploy import DEFAULT_VARIABLES, README_TEMPLATE, Deployment, app_files, deploy_space, render_readme
from catalog.templates import find_template_folders
from tests.fakehub import FakeHub
from tests.test_cli import cli_env, run_cli

ADMIN_SECRET = "admin-s3cret-value"
DATABASE_URL = "postgresql://envhub:db-pa55word@db.example.org/envhub"


def front_matter(readme: str) -> dict[str, object]:
    match = re.match(r"---\n(.*?)\n---\n", readme, re.DOTALL)
    assert match, readme[:200]
    loaded = yaml.safe_load(match.group(1))
    assert isinstance(loaded, dict)
    return loaded


def test_deploy_uploads_the_app_and_its_card(hub: FakeHub, tmp_path: Path) -> None:
    env = cli_env(tmp_path, hub.url) | {"HF_TOKEN": "hf_test", "DB_FROM_ENV": DATABASE_URL}
    env["ENVHUB_ADMIN_TOKEN"] = ADMIN_SECRET

    done = run_cli(
        env,
        "deploy",
        "--space",
        "alice/openenv-hub",
        "--secret",
        "ENVHUB_ADMIN_TOKEN",  # the value comes from the environment
        "--database-url",
        DATABASE_URL,
        "--variable",
        "ENVHUB_SYNC_INTERVAL_S=600",
    )

    assert done.returncode == 0, done.stderr
    files = hub.files("alice/openenv-hub")
    assert sorted(files) == sorted([*app_files(REPO_ROOT), "README.md"])
    for path in files:
        assert path.split("/")[0] in {
            "app",
            "catalog",
            "conformance",
            "core",
            "envclient",
            "evals",
            "gateway",
            "hosting",
            "migrations",
        } | {
            "protocol",
            "rollout",
            "spaces_templates",
            "README.md",
            "requirements.txt",
            "Dockerfile",
            ".dockerignore",
        }
        assert "__pycache__" not in path and not path.endswith((".pyc", ".db"))
    assert {
        "Dockerfile",
        "requirements.txt",
        "app/__main__.py",
        "gateway/relay.py",
        "evals/runs.py",
        "spaces_templates/maze/openenv.yaml",
    } <= set(files)
    assert files["Dockerfile"] == (REPO_ROOT / "Dockerfile").read_bytes()

    readme = files["README.md"].decode()
    card = front_matter(readme)
    assert card["title"] == "openenv-hub"
    assert (card["sdk"], card["app_port"], card["hf_oauth"]) == ("docker", 7860, True)
    assert card["hf_oauth_scopes"] == ["manage-repos", "write-repos"]
    assert isinstance(card["hf_oauth_expiration_minutes"], int)
    assert isinstance(card["tags"], list) and "envhub" in card["tags"]
    assert "openenv" not in card["tags"]  # a sync of the Hub would list envhub as an environment
    for key in ("emoji", "colorFrom", "colorTo", "short_description"):
        assert card[key], key
    # The Hub's own card parser reads it the same way.
    assert SpaceCard(readme).data.get("sdk") == "docker"
    assert "https://alice-openenv-hub.hf.space" in readme
    assert "$" not in readme.split("---", 2)[2]  # every placeholder filled

    assert hub.variables("alice/openenv-hub") == DEFAULT_VARIABLES | {"ENVHUB_SYNC_INTERVAL_S": "600"}
    assert hub.variables("alice/openenv-hub")["ENVHUB_ALLOW_PRIVATE_URLS"] == "false"
    assert hub.secrets("alice/openenv-hub") == {"ENVHUB_ADMIN_TOKEN": ADMIN_SECRET, "ENVHUB_DATABASE_URL": DATABASE_URL}
    output = done.stdout + done.stderr
    assert ADMIN_SECRET not in output and "db-pa55word" not in output
    assert f"{hub.url}/spaces/alice/openenv-hub" in done.stdout
    assert "https://alice-openenv-hub.hf.space" in done.stdout
    assert "alice-openenv-hub.hf.space" in done.stdout.splitlines()[-1]
    assert hub.settings("alice/openenv-hub").sdk == "docker"
    assert not hub.settings("alice/openenv-hub").private


def test_deploying_again_updates_the_space_and_drops_stale_files(hub: FakeHub) -> None:
    api = HfApi(endpoint=hub.url, token="hf_test")
    first = deploy_space(api, Deployment("alice/envhub", private=True), say=lambda _: None)
    api.upload_file(
        path_or_fileobj=b"*.bin filter=lfs\n", path_in_repo=".gitattributes", repo_id="alice/envhub", repo_type="space"
    )
    api.upload_file(
        path_or_fileobj=b"old = 1\n", path_in_repo="app/removed.py", repo_id="alice/envhub", repo_type="space"
    )

    again = deploy_space(
        api, Deployment("alice/envhub", title="My envhub", secrets={"ENVHUB_ADMIN_TOKEN": "x"}), say=lambda _: None
    )

    files = hub.files("alice/envhub")
    assert "app/removed.py" not in files
    assert ".gitattributes" in files  # the Hub's own file stays
    assert sorted(set(files) - {".gitattributes"}) == sorted(again.files) == sorted(first.files)
    assert front_matter(files["README.md"].decode())["title"] == "My envhub"
    assert [w.action for w in hub.writes].count("create") == 1
    assert hub.settings("alice/envhub").private  # visibility is chosen when the Space is created
    assert hub.secrets("alice/envhub") == {"ENVHUB_ADMIN_TOKEN": "x"}
    assert again.app_url == "https://alice-envhub.hf.space"

    commits = [w.action for w in hub.writes].count("commit")  # huggingface_hub cuts a large upload into parts
    said: list[str] = []
    deploy_space(api, Deployment("alice/envhub", title="My envhub"), say=said.append)
    assert [w.action for w in hub.writes].count("commit") == commits  # nothing new to commit
    assert any("unchanged since" in line for line in said), said


def test_a_refused_token_is_a_clear_error(hub: FakeHub, tmp_path: Path) -> None:
    env = cli_env(tmp_path, hub.url) | {"HF_TOKEN": "hf_not_a_token"}
    refused = run_cli(env, "deploy", "--space", "alice/envhub")
    assert refused.returncode == 1
    assert "creating the Space alice/envhub failed: 401" in refused.stderr
    assert f"create a write token at {hub.url}/settings/tokens" in refused.stderr
    assert "Traceback" not in refused.stderr

    elsewhere = run_cli(env | {"HF_TOKEN": "hf_test"}, "deploy", "--space", "bob/envhub")
    assert elsewhere.returncode == 1
    assert "failed: 403" in elsewhere.stderr and "may not write to 'bob'" in elsewhere.stderr

    missing = run_cli(env | {"HF_TOKEN": ""}, "deploy", "--space", "alice/envhub")
    assert missing.returncode == 1
    assert "no Hugging Face token: set HF_TOKEN or pass --token" in missing.stderr
    assert not [w for w in hub.writes]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--space", "envhub"], "'envhub' is not a Space id: use OWNER/NAME"),
        (["--space", "alice/envhub", "--secret", "NOT SET"], "'NOT SET' is not a variable name"),
        (["--space", "alice/envhub", "--secret", "ENVHUB_MISSING_VALUE"], "ENVHUB_MISSING_VALUE has no value"),
    ],
)
def test_bad_options_are_refused_before_any_hub_call(
    hub: FakeHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    monkeypatch.delenv("ENVHUB_MISSING_VALUE", raising=False)
    assert main(["deploy", *args]) == 1
    assert message in capsys.readouterr().err
    assert hub.writes == []


def test_only_app_files_are_picked(tmp_path: Path) -> None:
    wanted = [
        ".dockerignore",
        "Dockerfile",
        "app/__main__.py",
        "app/ui/page.py",
        "catalog/models.py",
        "conformance/runner.py",
        "core/db.py",
        "envclient/ws.py",
        "evals/runs.py",
        "gateway/relay.py",
        "hosting/endpoints.py",
        "migrations/env.py",
        "protocol/frames.py",
        "requirements.txt",
        "rollout/episodes.py",
        "spaces_templates/envhub.README.md",
        "spaces_templates/maze/.dockerignore",
        "spaces_templates/maze/server/app.py",
    ]
    unwanted = [
        "README.md",
        "data/envhub.db",
        "tests/test_x.py",
        ".venv/bin/python",
        ".git/HEAD",
        "app/__pycache__/main.cpython-311.pyc",
        "spaces_templates/maze/.venv/lib/site.py",
        "catalog/catalog.db",
        "bench/run.py",
    ]
    for name in wanted + unwanted:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    assert app_files(tmp_path) == sorted(wanted)


def test_the_card_template_is_not_an_environment_template() -> None:
    assert (REPO_ROOT / README_TEMPLATE).is_file()
    names = [folder.name for folder in find_template_folders([REPO_ROOT / "spaces_templates"])]
    assert "maze" in names and not any("README" in name for name in names)


def test_card_values_are_yaml_not_text() -> None:
    template = (REPO_ROOT / README_TEMPLATE).read_text()
    readme = render_readme(
        template, "alice/envhub", "https://alice-envhub.hf.space", title='Hub: "quoted" # not a comment'
    )
    assert front_matter(readme)["title"] == 'Hub: "quoted" # not a comment'


def test_private_does_not_silently_leave_an_existing_space_public(hub: FakeHub) -> None:
    api = HfApi(endpoint=hub.url, token="hf_test")
    api.create_repo("alice/envhub", repo_type="space", space_sdk="docker")
    said: list[str] = []
    deploy_space(api, Deployment("alice/envhub", private=True), say=said.append)
    assert any("alice/envhub is public; --private only applies to a new Space" in line for line in said), said
