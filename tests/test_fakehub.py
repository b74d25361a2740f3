"""Tests for the fake Hub, driven only through the real huggingface_hub client."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from huggingface_hub import HfApi, SpaceHardware, snapshot_download
from huggingface_hub.errors import (
    BadRequestError,
    HfHubHTTPError,
    HfUriError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import get_session, http_backoff

from tests.fakehub import EMPTY_TREE_SHA, FakeHub, Fault, SpaceSettings, Write

README = "---\ntitle: Chess Env\nsdk: docker\napp_port: 8000\ntags: [openenv]\n---\n# Chess\n"


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub(page_size=3) as fake:
        yield fake


@pytest.fixture
def api(hub: FakeHub) -> HfApi:
    return HfApi(endpoint=hub.url, token="hf_test")


def test_list_spaces_follows_link_pages(hub: FakeHub, api: HfApi) -> None:
    ids = [f"org/env-{i:02d}" for i in range(8)]
    for space_id in reversed(ids):
        hub.add_space(space_id, files={"README.md": README}, likes=3)
    hub.add_space("org/not-an-env", tags=("gradio",))

    spaces = list(
        api.list_spaces(
            filter="openenv",
            expand=["sha", "subdomain", "cardData", "runtime", "likes"],
        )
    )

    assert [s.id for s in spaces] == ids
    assert hub.count("/api/spaces") == 3  # 8 results, pages of 3
    assert [r.query.get("cursor") for r in hub.requests] == [
        None,
        ["org/env-02"],
        ["org/env-05"],
    ]
    # The client follows the Link URL verbatim, so the next page must repeat every parameter.
    assert all(r.query["filter"] == ["openenv"] for r in hub.requests)
    first = spaces[0]
    assert first.subdomain == "org-env-00"
    assert first.likes == 3
    assert first.sha is not None and len(first.sha) == 40
    assert first.runtime is not None and first.runtime.stage == "RUNNING"
    assert first.card_data is not None and first.card_data.app_port == 8000
    # Only the expanded properties come back.
    assert first.host is None and first.tags is None


def test_list_spaces_sort_limit_and_default_keys(hub: FakeHub, api: HfApi) -> None:
    for i in range(7):
        hub.add_space(f"org/env-{i}", likes=i % 4, trending_score=i)

    by_likes = [s.id for s in api.list_spaces(sort="likes", limit=5)]

    assert by_likes == ["org/env-3", "org/env-2", "org/env-6", "org/env-1", "org/env-5"]
    assert hub.count("/api/spaces") == 2  # limit 5 with pages of 3, no third page
    default = next(iter(api.list_spaces(search="ENV-4")))
    assert (default.id, default.sdk, default.tags, default.trending_score) == (
        "org/env-4",
        "docker",
        ["openenv"],
        4,
    )
    assert default.sha is None and default.runtime is None


def test_filter_requires_all_tags(hub: FakeHub, api: HfApi) -> None:
    hub.add_space("a/both", tags=("openenv", "chess"))
    hub.add_space("a/only-openenv", tags=("openenv",))
    hub.add_space("a/only-chess", tags=("chess",))

    assert [s.id for s in api.list_spaces(filter=["openenv", "chess"])] == ["a/both"]
    assert [s.id for s in api.list_spaces(filter="chess", author="a")] == [
        "a/both",
        "a/only-chess",
    ]


def test_list_datasets_filter(hub: FakeHub, api: HfApi) -> None:
    hub.add_dataset(
        "org/trajectories",
        card_data={"license": "mit"},
        downloads=12,
        description="Episodes",
    )
    hub.add_dataset("org/other", tags=("text",))

    datasets = list(api.list_datasets(filter="openenv", expand=["cardData", "downloads", "description"]))

    assert [d.id for d in datasets] == ["org/trajectories"]
    assert datasets[0].downloads == 12
    assert datasets[0].description == "Episodes"
    assert datasets[0].card_data is not None and datasets[0].card_data.license == "mit"


def test_space_info_and_runtime(hub: FakeHub, api: HfApi) -> None:
    hub.add_space(
        "Alice/My_Env",
        files={"README.md": README, "server/app.py": "app = 1"},
        stage="BUILDING",
    )

    info = api.space_info("alice/my_env")

    assert info.id == "Alice/My_Env"
    assert info.host == "https://alice-my-env.hf.space"
    assert info.subdomain == "alice-my-env"
    assert info.runtime is not None and info.runtime.stage == "BUILDING"
    assert info.runtime.raw["domains"] == [{"domain": "alice-my-env.hf.space", "stage": "READY"}]
    assert [s.rfilename for s in info.siblings or []] == ["README.md", "server/app.py"]
    assert info.card_data is not None and info.card_data.title == "Chess Env"
    assert api.space_info("Alice/My_Env", revision=info.sha).sha == info.sha
    with pytest.raises(RevisionNotFoundError):
        api.space_info("Alice/My_Env", revision="v1")

    hub.update_space("Alice/My_Env", stage="RUNNING")
    runtime = api.get_space_runtime("Alice/My_Env")
    assert (runtime.stage, runtime.hardware, runtime.sleep_time) == (
        "RUNNING",
        "cpu-basic",
        172800,
    )
    assert api.space_info("Alice/My_Env").sha == info.sha  # no file change, same commit


def test_update_space_files_change_sha(hub: FakeHub, api: HfApi) -> None:
    hub.add_space("org/env", files={"README.md": README, "a.txt": "a"})
    before = api.space_info("org/env")

    hub.update_space("org/env", files={"b.txt": b"b"}, likes=9)

    after = api.space_info("org/env")
    assert after.sha != before.sha
    assert after.likes == 9
    assert [s.rfilename for s in after.siblings or []] == [
        "README.md",
        "a.txt",
        "b.txt",
    ]
    assert after.last_modified is not None and before.last_modified is not None
    assert after.last_modified > before.last_modified
    hub.remove_space("org/env")
    with pytest.raises(RepositoryNotFoundError):
        api.space_info("org/env")


def test_hf_hub_download(hub: FakeHub, api: HfApi, tmp_path: Path) -> None:
    hub.add_space("org/env", files={"README.md": README, "dir/with space é.py": b"\x00\x01"})
    cache = tmp_path / "cache"

    path = api.hf_hub_download("org/env", "README.md", repo_type="space", cache_dir=cache)
    nested = api.hf_hub_download("org/env", "dir/with space é.py", repo_type="space", cache_dir=cache)

    assert Path(path).read_text(encoding="utf-8") == README
    assert Path(nested).read_bytes() == b"\x00\x01"
    assert hub.count("/spaces/org/env/resolve/main/README.md", method="HEAD") == 1
    assert hub.count("/spaces/org/env/resolve/main/README.md", method="GET") == 1


def test_missing_file_and_repo(hub: FakeHub, api: HfApi, tmp_path: Path) -> None:
    hub.add_space("org/env", files={"README.md": README})

    with pytest.raises(RemoteEntryNotFoundError):
        api.hf_hub_download("org/env", "nope.txt", repo_type="space", cache_dir=tmp_path)
    with pytest.raises(RepositoryNotFoundError):
        api.hf_hub_download("org/ghost", "README.md", repo_type="space", cache_dir=tmp_path)
    with pytest.raises(RepositoryNotFoundError):
        api.space_info("org/ghost")
    with pytest.raises(RepositoryNotFoundError):
        api.dataset_info("org/ghost")


def test_earlier_revisions_keep_their_files(hub: FakeHub, api: HfApi, tmp_path: Path) -> None:
    hub.add_space("org/env", files={"README.md": README, "app.py": "old = 1\n", "gone.txt": "g"})
    old = api.space_info("org/env").sha
    hub.update_space("org/env", files={"app.py": "new = 2\n", "gone.txt": None})
    new = api.space_info("org/env").sha
    assert old is not None and new not in (None, old)

    folder = snapshot_download("org/env", repo_type="space", revision=old, local_dir=tmp_path / "old", endpoint=hub.url)

    assert (Path(folder) / "app.py").read_text() == "old = 1\n"
    assert (Path(folder) / "gone.txt").is_file()
    assert api.list_repo_files("org/env", repo_type="space", revision=old) == ["README.md", "app.py", "gone.txt"]
    assert api.list_repo_files("org/env", repo_type="space") == ["README.md", "app.py"]
    assert api.space_info("org/env", revision=old).sha == old
    current = api.hf_hub_download("org/env", "app.py", repo_type="space", revision=new, cache_dir=tmp_path / "c")
    assert Path(current).read_text() == "new = 2\n"
    with pytest.raises(RevisionNotFoundError):
        api.list_repo_files("org/env", repo_type="space", revision="0" * 40)


def test_a_private_spaces_files_need_a_token_that_may_read_them(hub: FakeHub, tmp_path: Path) -> None:
    hub.users["hf_bob"] = "bob"
    hub.add_space("alice/secret", files={"README.md": README}, private=True)
    sha = HfApi(endpoint=hub.url, token="hf_test").space_info("alice/secret").sha
    assert sha is not None

    for token in (False, "hf_bob"):  # nobody, then someone outside alice's namespace
        outsider = HfApi(endpoint=hub.url, token=token)
        with pytest.raises(RepositoryNotFoundError):
            outsider.list_repo_files("alice/secret", repo_type="space", revision=sha)
        with pytest.raises(RepositoryNotFoundError):
            outsider.space_info("alice/secret", revision=sha)
        with pytest.raises(RepositoryNotFoundError):
            outsider.hf_hub_download("alice/secret", "README.md", repo_type="space", cache_dir=tmp_path / "c")

    folder = snapshot_download(
        "alice/secret", repo_type="space", revision=sha, local_dir=tmp_path / "mine", endpoint=hub.url, token="hf_test"
    )
    assert (Path(folder) / "README.md").read_text() == README


def test_whoami(hub: FakeHub, api: HfApi) -> None:
    assert api.whoami()["name"] == "alice"
    response = http_backoff("GET", hub.url + "/api/whoami-v2", max_retries=0)
    assert response.status_code == 401
    assert "X-Error-Code" not in response.headers


def test_503_then_success_is_retried(hub: FakeHub) -> None:
    hub.add_space("org/env")
    hub.fail("GET", "/api/spaces", Fault(status=503))

    response = http_backoff("GET", hub.url + "/api/spaces", base_wait_time=0.01, max_wait_time=0.02)

    assert response.status_code == 200
    assert [item["id"] for item in response.json()] == ["org/env"]
    assert hub.count("/api/spaces") == 2


def test_429_retry_after_and_reset_are_retried(hub: FakeHub) -> None:
    hub.fail("GET", "/api/spaces", Fault(status=429, retry_after=0), Fault(reset=True))

    response = http_backoff("GET", hub.url + "/api/spaces", base_wait_time=0.01, max_wait_time=0.02)

    assert response.status_code == 200
    assert hub.count("/api/spaces") == 3


def test_body_fault_and_unretried_status(hub: FakeHub, api: HfApi) -> None:
    hub.add_space("org/env")
    hub.fail("GET", "/api/spaces/org/env", Fault(body=b"not json"), Fault(status=500))

    with pytest.raises(json.JSONDecodeError):
        api.space_info("org/env")
    with pytest.raises(HfHubHTTPError) as excinfo:
        api.space_info("org/env")
    assert excinfo.value.response.status_code == 500
    assert api.space_info("org/env").id == "org/env"


def test_stop_interrupts_hang(hub: FakeHub) -> None:
    hub.fail("GET", "/api/spaces", Fault(hang_s=30))
    errors: list[BaseException] = []

    def call() -> None:
        try:
            http_backoff("GET", hub.url + "/api/spaces", max_retries=0)
        except Exception as exc:
            errors.append(exc)

    client = threading.Thread(target=call, daemon=True)
    client.start()
    deadline = time.monotonic() + 2
    while hub.count("/api/spaces") == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hub.count("/api/spaces") == 1

    started = time.monotonic()
    hub.stop()

    assert time.monotonic() - started < 2
    client.join(timeout=2)
    assert not client.is_alive()
    assert len(errors) == 1


# ---------------------------------------------------------------------------- writes: repos, commits, Space settings


def _space_folder(root: Path) -> Path:
    folder = root / "env"
    (folder / "server" / "static").mkdir(parents=True)
    (folder / "README.md").write_text(README, encoding="utf-8")
    (folder / "server" / "app.py").write_text("app = 1\n", encoding="utf-8")
    (folder / "server" / "static" / "index.html").write_bytes(b"<p>\xc3\xa9</p>")
    (folder / "notes.txt").write_text("notes\n", encoding="utf-8")
    return folder


def _folder_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _commit_lines(hub: FakeHub) -> list[dict[str, object]]:
    commits = [r for r in hub.requests if r.method == "POST" and "/commit/" in r.path]
    return [json.loads(line) for line in commits[-1].body.splitlines() if line.strip()]


def test_create_repo_and_exist_ok(hub: FakeHub, api: HfApi) -> None:
    url = api.create_repo(
        "alice/chess",
        repo_type="space",
        space_sdk="docker",
        private=True,
        space_hardware=SpaceHardware.T4_SMALL,
        space_sleep_time=3600,
        space_secrets=[{"key": "API_KEY", "value": "s3cret"}],
        space_variables=[{"key": "MODE", "value": "fast", "description": "speed"}],
    )

    assert (url.repo_id, url.repo_type, str(url)) == ("alice/chess", "space", f"{hub.url}/spaces/alice/chess")
    assert hub.files("alice/chess") == {}
    info = api.space_info("alice/chess")
    assert (info.sha, info.private, info.sdk, info.siblings) == (EMPTY_TREE_SHA, True, "docker", [])
    assert info.runtime is not None and info.runtime.stage == "BUILDING"
    assert hub.settings("alice/chess") == SpaceSettings(
        private=True,
        visibility="private",
        sdk="docker",
        hardware="t4-small",
        sleep_time=3600,
        stage="BUILDING",
        error_message=None,
        host="https://alice-chess.hf.space",
    )
    assert hub.secrets("alice/chess") == {"API_KEY": "s3cret"}
    assert hub.variables("alice/chess") == {"MODE": "fast"}
    assert hub.writes == [Write("alice", "create", "space", "alice/chess")]

    with pytest.raises(HfHubHTTPError) as excinfo:
        api.create_repo("Alice/CHESS", repo_type="space", space_sdk="gradio")
    assert excinfo.value.response.status_code == 409
    assert api.create_repo("alice/chess", repo_type="space", space_sdk="docker", exist_ok=True).repo_id == "alice/chess"
    assert hub.settings("alice/chess").private  # exist_ok changes nothing

    dataset = api.create_repo("alice/episodes", repo_type="dataset")
    model = api.create_repo("policy")  # no namespace: the token's user
    assert (dataset.repo_type, model.repo_id, model.repo_type) == ("dataset", "alice/policy", "model")
    assert api.dataset_info("alice/episodes").sha == EMPTY_TREE_SHA
    assert api.model_info("alice/policy").id == "alice/policy"
    with pytest.raises(BadRequestError, match="Invalid hardware"):
        api.create_repo("alice/gpu", repo_type="space", space_sdk="docker", space_hardware="quantum-xl")  # type: ignore[arg-type]


def test_upload_folder_commits_changes_and_deletions(hub: FakeHub, api: HfApi, tmp_path: Path) -> None:
    api.create_repo("alice/chess", repo_type="space", space_sdk="docker")
    folder = _space_folder(tmp_path)

    first = api.upload_folder(repo_id="alice/chess", folder_path=folder, repo_type="space")

    assert hub.files("alice/chess") == _folder_files(folder)
    info = api.space_info("alice/chess")
    assert first.oid == info.sha != EMPTY_TREE_SHA
    assert first.commit_url == f"{hub.url}/spaces/alice/chess/commit/{first.oid}"
    assert info.card_data is not None and info.card_data.title == "Chess Env"
    assert info.tags == ["docker", "openenv"]  # derived from the README, like the Hub does
    assert [s.rfilename for s in info.siblings or []] == sorted(_folder_files(folder))
    assert hub.count("/api/validate-yaml", "POST") == 1
    assert [w.action for w in hub.writes] == ["create", "commit"]

    (folder / "server" / "app.py").write_text("app = 2\n", encoding="utf-8")
    (folder / "notes.txt").unlink()
    hub.clear_requests()
    second = api.upload_folder(repo_id="alice/chess", folder_path=folder, repo_type="space", delete_patterns="*")

    assert hub.files("alice/chess") == _folder_files(folder)
    assert second.oid == api.space_info("alice/chess").sha != first.oid
    # Unchanged files are skipped (preupload returned their git blob oid): only the change and the deletion go.
    assert _commit_lines(hub)[1:] == [
        {"key": "deletedFile", "value": {"path": "notes.txt"}},
        {"key": "file", "value": {"content": "YXBwID0gMgo=", "path": "server/app.py", "encoding": "base64"}},
    ]
    assert hub.count("/api/spaces/alice/chess/tree/main") == 2  # 5 entries in pages of 3

    hub.clear_requests()
    third = api.upload_folder(repo_id="alice/chess", folder_path=folder, repo_type="space", delete_patterns="*")
    assert third.oid == second.oid
    assert hub.count("/api/spaces/alice/chess/commit") == 0
    assert hub.count("/api/spaces/alice/chess/revision/main") == 1


def test_upload_file_delete_file_and_parent_commit(hub: FakeHub, api: HfApi) -> None:
    api.create_repo("alice/episodes", repo_type="dataset")
    first = api.upload_file(
        path_or_fileobj=b"a,b\n", path_in_repo="data/train.csv", repo_id="alice/episodes", repo_type="dataset"
    )
    api.upload_file(path_or_fileobj=b"x", path_in_repo="data/extra.csv", repo_id="alice/episodes", repo_type="dataset")

    with pytest.raises(HfHubHTTPError) as excinfo:
        api.upload_file(
            path_or_fileobj=b"stale",
            path_in_repo="data/train.csv",
            repo_id="alice/episodes",
            repo_type="dataset",
            parent_commit=first.oid,
        )
    assert excinfo.value.response.status_code == 412
    assert [f.path for f in api.list_repo_tree("alice/episodes", repo_type="dataset")] == ["data"]

    api.delete_file("data/extra.csv", repo_id="alice/episodes", repo_type="dataset")
    assert hub.files("alice/episodes", repo_type="dataset") == {"data/train.csv": b"a,b\n"}
    with pytest.raises(RemoteEntryNotFoundError):
        api.delete_file("data/extra.csv", repo_id="alice/episodes", repo_type="dataset")
    api.delete_folder("data", repo_id="alice/episodes", repo_type="dataset")
    assert hub.files("alice/episodes", repo_type="dataset") == {}


def test_lfs_lines_are_refused_clearly(hub: FakeHub, api: HfApi) -> None:
    api.create_repo("alice/chess", repo_type="space", space_sdk="docker")
    lines = [
        {"key": "header", "value": {"summary": "big file"}},
        {"key": "lfsFile", "value": {"path": "model.bin", "algo": "sha256", "oid": "0" * 64, "size": 1}},
    ]

    response = http_backoff(
        "POST",
        f"{hub.url}/api/spaces/alice/chess/commit/main",
        content=b"".join(json.dumps(line).encode() + b"\n" for line in lines),
        headers={"Authorization": "Bearer hf_test", "Content-Type": "application/x-ndjson"},
        max_retries=0,
    )

    assert response.status_code == 400
    assert "lfsFile" in response.json()["error"] and 'uploadMode "regular"' in response.json()["error"]
    assert hub.files("alice/chess") == {}


def test_duplicate_repo_with_settings(hub: FakeHub, api: HfApi) -> None:
    hub.add_space("org/chess", files={"README.md": README, "server/app.py": "app = 1"})
    source = api.space_info("org/chess")

    url = api.duplicate_repo(
        "org/chess",
        to_id="alice/chess-copy",
        repo_type="space",
        private=True,
        space_hardware=SpaceHardware.T4_MEDIUM,
        space_sleep_time=600,
        space_secrets=[{"key": "OPENAI_API_KEY", "value": "sk-1", "description": "LLM"}],
        space_variables=[{"key": "MODE", "value": "fast"}],
    )

    assert (url.repo_id, url.repo_type) == ("alice/chess-copy", "space")
    assert hub.files("alice/chess-copy") == hub.files("org/chess")
    copy = api.space_info("alice/chess-copy")
    assert copy.sha == source.sha  # the git history comes along
    assert copy.card_data is not None and copy.card_data.title == "Chess Env"
    assert copy.host == "https://alice-chess-copy.hf.space"
    settings = hub.settings("alice/chess-copy")
    assert (settings.private, settings.hardware, settings.sleep_time, settings.stage) == (
        True,
        "t4-medium",
        600,
        "BUILDING",
    )
    assert hub.secrets("alice/chess-copy") == {"OPENAI_API_KEY": "sk-1"}
    assert {k: v.value for k, v in api.get_space_variables("alice/chess-copy").items()} == {"MODE": "fast"}
    assert hub.writes[-1] == Write("alice", "duplicate", "space", "alice/chess-copy", "org/chess")

    with pytest.raises(HfHubHTTPError) as excinfo:
        api.duplicate_repo("org/chess", to_id="alice/chess-copy", repo_type="space")
    assert excinfo.value.response.status_code == 409
    again = api.duplicate_repo("org/chess", to_id="alice/chess-copy", repo_type="space", exist_ok=True)
    assert again.repo_id == "alice/chess-copy"
    # Without a namespace the client asks whoami; the copy keeps the source's (public) visibility.
    assert api.duplicate_repo("org/chess", repo_type="space").repo_id == "alice/chess"
    assert not hub.settings("alice/chess").private
    with pytest.raises(RepositoryNotFoundError):
        api.duplicate_repo("org/ghost", to_id="alice/ghost", repo_type="space")


def test_wait_for_space_walks_the_boot_sequence(hub: FakeHub, api: HfApi) -> None:
    api.create_repo("alice/chess", repo_type="space", space_sdk="docker")

    runtime = api.wait_for_space("alice/chess", timeout=5, poll_interval=0.01)

    assert runtime.stage == "RUNNING"
    assert hub.count("/api/spaces/alice/chess/runtime") == 2  # BUILDING, then RUNNING
    assert api.space_info("alice/chess").runtime is not None

    hub.boot_sequence = ["BUILDING", "APP_STARTING", "RUNNING_APP_STARTING", "RUNNING"]
    api.restart_space("alice/chess")
    hub.clear_requests()
    stages = [api.get_space_runtime("alice/chess").stage for _ in range(5)]
    assert stages == ["BUILDING", "APP_STARTING", "RUNNING_APP_STARTING", "RUNNING", "RUNNING"]
    listed = next(iter(api.list_spaces(search="chess", expand=["runtime"])))
    assert listed.runtime is not None and listed.runtime.stage == "RUNNING"


def test_build_error_and_set_stage(hub: FakeHub, api: HfApi) -> None:
    hub.boot_sequence = ["BUILDING", "BUILD_ERROR"]
    hub.boot_error_message = "Dockerfile:3: pip install failed"
    api.create_repo("alice/broken", repo_type="space", space_sdk="docker")

    runtime = api.wait_for_space("alice/broken", timeout=5, poll_interval=0.01)

    assert runtime.stage == "BUILD_ERROR"
    assert runtime.raw["errorMessage"] == "Dockerfile:3: pip install failed"
    assert hub.settings("alice/broken").error_message == "Dockerfile:3: pip install failed"

    hub.set_stage("alice/broken", "RUNTIME_ERROR", error_message="Exit code: 137. Reason: OOM")
    assert api.get_space_runtime("alice/broken").raw["errorMessage"] == "Exit code: 137. Reason: OOM"
    hub.set_stage("alice/broken", "RUNNING")
    assert "errorMessage" not in api.get_space_runtime("alice/broken").raw


def test_pause_restart_hardware_and_sleep_time(hub: FakeHub, api: HfApi) -> None:
    hub.boot_sequence = ["RUNNING"]
    api.create_repo("alice/chess", repo_type="space", space_sdk="docker")

    paused = api.pause_space("alice/chess")
    assert (paused.stage, paused.hardware, paused.requested_hardware) == ("PAUSED", None, "cpu-basic")
    assert api.wait_for_space("alice/chess", timeout=1, poll_interval=0.01).stage == "PAUSED"

    hub.boot_sequence = ["BUILDING", "RUNNING"]
    assert api.restart_space("alice/chess", factory_reboot=True).stage == "BUILDING"
    assert api.wait_for_space("alice/chess", timeout=5, poll_interval=0.01).stage == "RUNNING"

    upgraded = api.request_space_hardware("alice/chess", SpaceHardware.A10G_SMALL, sleep_time=300)
    assert (upgraded.hardware, upgraded.sleep_time) == ("a10g-small", 300)
    assert api.set_space_sleep_time("alice/chess", 900).sleep_time == 900
    assert (hub.settings("alice/chess").hardware, hub.settings("alice/chess").sleep_time) == ("a10g-small", 900)
    assert [w.action for w in hub.writes] == ["create", "pause", "restart", "hardware", "sleeptime"]
    with pytest.raises(BadRequestError):
        api.request_space_hardware("alice/chess", "quantum-xl")  # type: ignore[arg-type]


def test_secrets_and_variables(hub: FakeHub, api: HfApi) -> None:
    api.create_repo("alice/chess", repo_type="space", space_sdk="docker")

    api.add_space_secret("alice/chess", "API_KEY", "one", description="upstream key")
    api.add_space_secret("alice/chess", "API_KEY", "two")  # update
    api.add_space_secret("alice/chess", "OTHER", "x")
    variables = api.add_space_variable("alice/chess", "MODE", "fast", description="speed")

    assert hub.secrets("alice/chess") == {"API_KEY": "two", "OTHER": "x"}
    secrets = api.get_space_secrets("alice/chess")
    assert sorted(secrets) == ["API_KEY", "OTHER"]
    assert secrets["API_KEY"].updated_at is not None
    raw = http_backoff(
        "GET", f"{hub.url}/api/spaces/alice/chess/secrets", headers={"Authorization": "Bearer hf_test"}, max_retries=0
    )
    assert raw.status_code == 200 and "two" not in raw.text and "value" not in raw.text
    assert (variables["MODE"].value, variables["MODE"].description) == ("fast", "speed")

    api.delete_space_secret("alice/chess", "OTHER")
    assert api.delete_space_variable("alice/chess", "MODE") == {}
    assert hub.secrets("alice/chess") == {"API_KEY": "two"}
    assert api.get_space_variables("alice/chess") == {}
    with pytest.raises(BadRequestError):
        api.add_space_variable("alice/chess", "1-bad key", "x")


def test_delete_repo(hub: FakeHub, api: HfApi) -> None:
    api.create_repo("alice/chess", repo_type="space", space_sdk="docker")
    api.create_repo("alice/episodes", repo_type="dataset")

    api.delete_repo("alice/chess", repo_type="space")
    api.delete_repo("alice/episodes", repo_type="dataset")

    with pytest.raises(RepositoryNotFoundError):
        api.space_info("alice/chess")
    assert list(api.list_datasets(author="alice")) == []
    with pytest.raises(RepositoryNotFoundError):
        api.delete_repo("alice/chess", repo_type="space")
    api.delete_repo("alice/chess", repo_type="space", missing_ok=True)
    # Deleted names are free again.
    assert api.create_repo("alice/chess", repo_type="space", space_sdk="docker").repo_id == "alice/chess"


def test_writes_need_a_known_token_and_an_owned_namespace() -> None:
    users = {"hf_alice": "alice", "hf_bob": "bob"}
    with FakeHub(users=users, orgs={"alice": ["openenv-org"]}) as hub:
        alice = HfApi(endpoint=hub.url, token="hf_alice")
        bob = HfApi(endpoint=hub.url, token="hf_bob")
        anonymous = HfApi(endpoint=hub.url, token=False)
        hub.add_space("bob/env", files={"README.md": README})

        assert alice.whoami()["orgs"][0]["name"] == "openenv-org"
        assert alice.create_repo("openenv-org/env", repo_type="space", space_sdk="docker").repo_id == "openenv-org/env"
        for client in (anonymous, HfApi(endpoint=hub.url, token="hf_unknown")):
            with pytest.raises(HfHubHTTPError) as unauthenticated:
                client.create_repo("alice/x", repo_type="space", space_sdk="docker")
            assert unauthenticated.value.response.status_code == 401
        with pytest.raises(HfHubHTTPError, match="Invalid user token"):
            HfApi(endpoint=hub.url, token="hf_unknown").whoami()

        forbidden: list[Callable[[], object]] = [
            lambda: alice.create_repo("bob/x", repo_type="space", space_sdk="docker"),
            lambda: alice.upload_file(path_or_fileobj=b"x", path_in_repo="x", repo_id="bob/env", repo_type="space"),
            lambda: alice.add_space_secret("bob/env", "K", "v"),
            lambda: alice.get_space_secrets("bob/env"),
            lambda: alice.pause_space("bob/env"),
            lambda: alice.delete_repo("bob/env", repo_type="space"),
            lambda: alice.duplicate_repo("bob/env", to_id="bob/env2", repo_type="space"),
        ]
        for attempt in forbidden:
            with pytest.raises(HfHubHTTPError) as denied:
                attempt()
            assert denied.value.response.status_code == 403
        # create_repo(exist_ok=True) answers a 403 on an existing repo with repo_info, then builds the URL without
        # its endpoint (huggingface_hub/hf_api.py:4779), so against any custom endpoint it fails to parse its own URL.
        with pytest.raises(HfUriError):
            alice.create_repo("bob/env", repo_type="space", space_sdk="docker", exist_ok=True)
        assert bob.add_space_secret("bob/env", "K", "v") is None
        assert alice.duplicate_repo("bob/env", to_id="alice/env", repo_type="space").repo_id == "alice/env"

        assert [(w.user, w.action, w.repo_id) for w in hub.writes] == [
            ("alice", "create", "openenv-org/env"),
            ("bob", "secrets", "bob/env"),
            ("alice", "duplicate", "alice/env"),
        ]
        assert hub.files("bob/env") == {"README.md": README.encode()}
        assert {r.user for r in hub.requests} == {"alice", "bob", None}


def test_set_host_points_the_space_at_a_local_app(hub: FakeHub, api: HfApi) -> None:
    class App(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"status":"healthy"}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    hub.add_space("org/chess", files={"README.md": README})
    with ThreadingHTTPServer(("127.0.0.1", 0), App) as app:
        threading.Thread(target=app.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        try:
            local = f"http://127.0.0.1:{app.server_address[1]}"
            hub.set_host("org/chess", local)

            info = api.space_info("org/chess")
            assert info.host == local
            assert info.runtime is not None
            assert info.runtime.raw["domains"] == [{"domain": f"127.0.0.1:{app.server_address[1]}", "stage": "READY"}]
            assert api.get_space_runtime("org/chess").raw["domains"] == info.runtime.raw["domains"]
            assert info.subdomain == "org-chess"
            assert get_session().get(f"{info.host}/health").json() == {"status": "healthy"}
        finally:
            app.shutdown()
    hub.set_host("org/chess", None)
    assert api.space_info("org/chess").host == "https://org-chess.hf.space"
