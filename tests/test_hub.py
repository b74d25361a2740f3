"""The Hub adapter against the fake Hub over HTTP: listings, files within a size limit, runtimes, failures."""

import pytest

from catalog.hub import HubClient, SpaceRuntimeInfo, space_credentials
from catalog.space_access import SpaceKeys
from core.errors import HubUnavailableError
from tests.conftest import space_files
from tests.fakehub import FakeHub, Fault

TOKEN = "hf_test_secret"


def client(hub: FakeHub) -> HubClient:
    return HubClient(hub.url, timeout_s=5, max_retries=2, backoff_s=0.01)


def test_only_environment_spaces_are_listed_with_what_a_sync_needs(hub: FakeHub) -> None:
    hub.add_space("alice/count", files=space_files("Count"), likes=3, trending_score=2)
    hub.add_space("bob/notes", tags=["gradio"])
    listed = list(client(hub).list_environment_spaces())
    assert [s.id for s in listed] == ["alice/count"]
    [count] = listed
    assert (count.likes, count.trending_score, count.sdk, count.stage) == (3, 2, "docker", "RUNNING")
    assert count.sha and "openenv" in count.tags


def test_datasets_of_both_tags_are_listed_once(hub: FakeHub) -> None:
    hub.add_dataset("alice/tasks", tags=["openenv", "rl-environment"])
    hub.add_dataset("bob/episodes", tags=["rl-environment"])
    hub.add_dataset("carol/images", tags=["vision"])
    assert sorted(d.id for d in client(hub).list_environment_datasets()) == ["alice/tasks", "bob/episodes"]


def test_a_file_is_cut_at_the_limit_and_a_missing_one_is_none(hub: FakeHub) -> None:
    hub.add_space("alice/count", files={"README.md": "x" * 100})
    hub_client = client(hub)
    [listing] = hub_client.list_environment_spaces()
    assert listing.sha is not None
    whole = hub_client.fetch_space_file("alice/count", "README.md", listing.sha, limit=1000)
    cut = hub_client.fetch_space_file("alice/count", "README.md", listing.sha, limit=10)
    assert whole is not None and (whole.content, whole.cut) == (b"x" * 100, False)
    assert cut is not None and (cut.content, cut.cut) == (b"x" * 10, True)
    assert hub_client.fetch_space_file("alice/count", "openenv.yaml", listing.sha, limit=1000) is None


def test_a_spaces_runtime_says_where_it_runs_and_whether_it_is_private(hub: FakeHub) -> None:
    hub.add_space("alice/count", stage="SLEEPING", private=True)
    runtime = client(hub).space_runtime("alice/count")
    assert runtime is not None
    assert (runtime.stage, runtime.host, runtime.private) == ("SLEEPING", "https://alice-count.hf.space", True)
    assert client(hub).space_runtime("alice/gone") is None


def test_transient_failures_are_retried_and_counted_once(hub: FakeHub) -> None:
    hub.add_space("alice/count")
    hub.fail("GET", "/api/spaces", Fault(status=503))
    hub_client = client(hub)
    assert [s.id for s in hub_client.list_environment_spaces()] == ["alice/count"]
    assert hub_client.requests == 1


def test_a_hub_that_keeps_failing_says_what_failed_where(hub: FakeHub) -> None:
    hub.fail("GET", "/api/spaces", *[Fault(status=500)] * 3)
    with pytest.raises(HubUnavailableError) as failed:
        list(client(hub).list_environment_spaces())
    assert (failed.value.status_code, failed.value.code) == (503, "hub_unavailable")
    assert hub.url in failed.value.message  # where it failed


def test_an_unreachable_hub_is_unavailable() -> None:
    with pytest.raises(HubUnavailableError) as failed:
        list(HubClient("http://127.0.0.1:9", timeout_s=1, max_retries=0).list_environment_spaces())
    assert (failed.value.status_code, failed.value.code) == (503, "hub_unavailable")
    assert "http://127.0.0.1:9" in failed.value.message  # where it failed


def test_a_private_spaces_host_gets_its_own_short_lived_key_never_the_hub_token(hub: FakeHub) -> None:
    hub.users[TOKEN] = "alice"
    hub.add_space("alice/count", files=space_files("Count"), private=True)
    keys = SpaceKeys(hub.url)
    private = SpaceRuntimeInfo("RUNNING", "https://alice-count.hf.space", private=True)

    [(host, header)] = space_credentials("alice/count", private, TOKEN, keys).items()
    assert host == "https://alice-count.hf.space"
    scheme, _, key = header["Authorization"].partition(" ")
    assert scheme == "Bearer" and key != TOKEN and hub.space_jwts[key] == "alice/count"
    assert space_credentials("alice/count", private, TOKEN, keys) == {host: header}  # kept until it nears expiry
    assert space_credentials("alice/count", private, None, keys) == {}
    public = SpaceRuntimeInfo("RUNNING", "https://alice-count.hf.space")
    assert space_credentials("alice/count", public, TOKEN, keys) == {}
    elsewhere = SpaceRuntimeInfo("RUNNING", "https://count.example.org", private=True)
    assert space_credentials("alice/count", elsewhere, TOKEN, keys) == {}
    lookalike = SpaceRuntimeInfo("RUNNING", "https://hf.space.example.org", private=True)
    assert space_credentials("alice/count", lookalike, TOKEN, keys) == {}
    assert space_credentials("alice/count", SpaceRuntimeInfo("RUNNING", None, private=True), TOKEN, keys) == {}
    assert space_credentials("alice/count", None, TOKEN, keys) == {}
    assert space_credentials("bob/secret", private, TOKEN, keys) == {}  # the Hub gives no key to a stranger's Space
