"""Tests for the fake Hub, driven only through the real huggingface_hub client."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import (
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import http_backoff

from tests.fakehub import FakeHub, Fault

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
        hub.add_space(f"org/env-{i}", likes=i % 4, trending_score=float(i))

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
