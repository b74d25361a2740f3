"""Syncing the fake Hub into a real catalog (SQLite and Postgres): first, incremental, removals and faults."""

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from app.made_from_settings import hub_from_settings
from app.settings import Settings
from catalog.models import Environment, SyncStatus
from catalog.search import EnvironmentQuery, search_environments
from catalog.store import get_dataset, get_environment
from catalog.sync import Syncer, get_sync_run
from core.errors import ConflictError
from tests.conftest import space_files, wait_until
from tests.fakehub import FakeHub, Fault

pytestmark = pytest.mark.databases


@pytest.fixture
def syncer(settings: Settings, engine: Engine) -> Syncer:
    return Syncer(engine, hub_from_settings(settings), workers=4)


@pytest.fixture
def impatient_syncer(settings: Settings, engine: Engine) -> Syncer:
    """Gives up on a request after half a second, for faults that never answer."""
    return Syncer(engine, hub_from_settings(settings.model_copy(update={"hub_timeout_s": 0.5})), workers=4)


def environment(engine: Engine, environment_id: str) -> Environment:
    with Session(engine) as session:
        found = session.get(Environment, environment_id)
        assert found is not None, f"{environment_id} is not in the catalog"
        return found


def listed_ids(engine: Engine, **query: object) -> list[str]:
    with Session(engine) as session:
        found, _ = search_environments(session, EnvironmentQuery.model_validate({"limit": 100, **query}))
    return sorted(e.id for e in found)


def add_spaces(hub: FakeHub, count: int) -> list[str]:
    ids = [f"org{i % 3}/env-{i:03d}" for i in range(count)]
    for i, space_id in enumerate(ids):
        hub.add_space(space_id, files=space_files(f"Env {i}"), likes=i)
    return ids


def test_first_sync_indexes_every_space_across_pages(hub: FakeHub, syncer: Syncer, engine: Engine) -> None:
    hub.page_size = 4
    ids = add_spaces(hub, 10)
    hub.add_space("someone/not-an-environment", files=space_files("Other"), tags=("gradio",))

    run = syncer.run()

    assert run.status == SyncStatus.OK, run.error
    assert (run.added, run.updated, run.unchanged, run.removed, run.failed) == (10, 0, 0, 0, 0)
    assert listed_ids(engine) == sorted(ids)
    assert hub.count("/api/spaces") == 3
    assert hub.count("/spaces/") == 20  # README.md and openenv.yaml of each Space
    assert run.requests == hub.count()
    env = environment(engine, "org1/env-001")
    assert (env.title, env.emoji, env.sdk, env.app_port, env.base_path) == ("Env 1", "🎲", "docker", 8000, "/web")
    assert env.host == "https://org1-env-001.hf.space"
    assert env.runtime_stage == "RUNNING"
    assert env.manifest is not None
    assert env.manifest["app"] == "server.app:app"
    assert env.readme.startswith("# Env 1")
    assert env.problems == []


def test_unchanged_resync_makes_only_listing_requests(hub: FakeHub, syncer: Syncer) -> None:
    hub.page_size = 4
    add_spaces(hub, 10)
    syncer.run()
    hub.clear_requests()

    run = syncer.run()

    assert (run.added, run.updated, run.unchanged) == (0, 0, 10)
    # Three pages of Spaces, and one listing per dataset tag.
    assert [r.path for r in hub.requests] == ["/api/spaces"] * 3 + ["/api/datasets"] * 2
    assert run.requests == 5


def test_changed_space_is_downloaded_again_alone(hub: FakeHub, syncer: Syncer, engine: Engine) -> None:
    add_spaces(hub, 5)
    syncer.run()
    hub.update_space("org0/env-003", files=space_files("Renamed Env"))
    hub.update_space("org1/env-004", likes=99)
    hub.clear_requests()

    run = syncer.run()

    assert (run.added, run.updated, run.unchanged) == (0, 2, 3)
    downloads = sorted(r.path for r in hub.requests if r.path.startswith("/spaces/"))
    assert len(downloads) == 2
    assert all("/org0/env-003/" in path for path in downloads)
    assert environment(engine, "org0/env-003").title == "Renamed Env"
    assert environment(engine, "org1/env-004").likes == 99
    assert listed_ids(engine, q="renamed") == ["org0/env-003"]


def test_full_sync_downloads_everything_again(hub: FakeHub, syncer: Syncer) -> None:
    add_spaces(hub, 3)
    syncer.run()
    hub.clear_requests()

    run = syncer.run(full=True)

    assert (run.updated, run.unchanged) == (3, 0)
    assert hub.count("/spaces/") == 6


def test_space_gone_from_the_listing_is_marked_removed(hub: FakeHub, syncer: Syncer, engine: Engine) -> None:
    add_spaces(hub, 3)
    syncer.run()
    hub.remove_space("org1/env-001")

    run = syncer.run()

    assert run.removed == 1
    assert environment(engine, "org1/env-001").removed_at is not None
    assert "org1/env-001" not in listed_ids(engine)
    assert "org1/env-001" in listed_ids(engine, include_removed=True)

    hub.add_space("org1/env-001", files=space_files("Env 1"))
    syncer.run()
    assert environment(engine, "org1/env-001").removed_at is None
    assert "org1/env-001" in listed_ids(engine)


def test_datasets_are_linked_both_ways(hub: FakeHub, syncer: Syncer, engine: Engine) -> None:
    hub.add_space("alice/wordle", files=space_files("Wordle", extra="datasets: [alice/words]\n"))
    hub.add_space("alice/chess", files=space_files("Chess"))
    hub.add_dataset("alice/words", tags=("openenv",), description="Five-letter words")
    hub.add_dataset("bob/games", tags=("rl-environment", "space:alice/chess"))
    hub.add_dataset("carol/puzzles", tags=("openenv",), card_data={"environments": [{"space_id": "alice/chess"}]})
    hub.add_dataset("dave/unrelated", tags=("nlp",))

    run = syncer.run()

    assert run.datasets == 3
    with Session(engine) as session:
        assert get_environment(session, "alice/wordle").datasets == ["alice/words"]
        assert get_environment(session, "alice/chess").datasets == ["bob/games", "carol/puzzles"]
        words = get_dataset(session, "alice/words")
        assert words.environments == ["alice/wordle"]
        assert words.description == "Five-letter words"


def test_retry_after_is_honoured_on_listing(hub: FakeHub, syncer: Syncer, engine: Engine) -> None:
    add_spaces(hub, 2)
    hub.fail("GET", "/api/spaces", Fault(status=429, retry_after=0))

    run = syncer.run()

    assert run.status == SyncStatus.OK, run.error
    assert hub.count("/api/spaces") == 2
    assert len(listed_ids(engine)) == 2


def test_server_errors_and_timeouts_are_retried(hub: FakeHub, impatient_syncer: Syncer, engine: Engine) -> None:
    syncer = impatient_syncer
    add_spaces(hub, 2)
    hub.fail("GET", "/api/spaces", Fault(status=503))
    hub.fail("GET", "/spaces/org0/env-000/resolve", Fault(hang_s=3), Fault(status=502))

    run = syncer.run()

    assert run.status == SyncStatus.OK, run.error
    assert run.failed == 0
    assert environment(engine, "org0/env-000").title == "Env 0"


def test_failing_entry_is_recorded_and_the_sync_goes_on(hub: FakeHub, syncer: Syncer, engine: Engine) -> None:
    add_spaces(hub, 3)
    hub.fail("GET", "/spaces/org2/env-002/resolve", *[Fault(status=500)] * 3)

    run = syncer.run()

    assert run.status == SyncStatus.OK
    assert (run.added, run.failed) == (2, 1)
    failed = environment(engine, "org2/env-002")
    assert failed.sha is None
    assert "could not read the Space's files" in failed.problems[0]
    assert "HTTP 500" in failed.problems[0]
    assert "org2/env-002" in listed_ids(engine)

    # The next sync tries again, and succeeds.
    run = syncer.run()
    assert (run.updated, run.failed) == (1, 0)
    assert environment(engine, "org2/env-002").problems == []


def test_failed_entry_keeps_what_was_known(hub: FakeHub, syncer: Syncer, engine: Engine) -> None:
    hub.add_space("alice/chess", files=space_files("Chess"))
    syncer.run()
    hub.update_space("alice/chess", files={"README.md": "changed"})
    hub.fail("GET", "/spaces/alice/chess/resolve", *[Fault(reset=True)] * 3)

    run = syncer.run()

    assert run.failed == 1
    env = environment(engine, "alice/chess")
    assert env.title == "Chess"
    assert env.readme.startswith("# Chess")
    assert env.problems[0].startswith("could not read the Space's files")


@pytest.mark.parametrize(
    "fault",
    [Fault(status=503), Fault(hang_s=3), Fault(body=b"<html>maintenance</html>"), Fault(reset=True)],
    ids=["5xx", "timeout", "not-json", "reset"],
)
def test_sync_that_cannot_finish_leaves_the_catalog_intact(
    hub: FakeHub, impatient_syncer: Syncer, engine: Engine, fault: Fault
) -> None:
    syncer = impatient_syncer
    ids = add_spaces(hub, 4)
    syncer.run()
    for space_id in ids:
        hub.update_space(space_id, files=space_files("Changed"))
    hub.remove_space(ids[0])
    hub.add_space("new/space", files=space_files("New"))
    # The Spaces list fine, then the dataset listing keeps failing past every retry.
    hub.fail("GET", "/api/datasets", *[fault] * 3)

    run = syncer.run()

    assert run.status == SyncStatus.FAILED
    assert run.error is not None
    assert f"listing datasets at {hub.url} failed" in run.error
    assert "catalog was left as it was" in run.error
    assert listed_ids(engine) == sorted(ids)
    assert all(environment(engine, i).title.startswith("Env") for i in ids)


def test_unreachable_hub_fails_with_a_clear_reason(settings: Settings, engine: Engine) -> None:
    unreachable = settings.model_copy(update={"hf_endpoint": "http://127.0.0.1:9"})
    run = Syncer(engine, hub_from_settings(unreachable)).run()
    assert run.status == SyncStatus.FAILED
    assert run.error is not None
    assert "listing spaces at http://127.0.0.1:9 failed" in run.error


def test_sync_in_progress_refuses_a_second_one(hub: FakeHub, syncer: Syncer, engine: Engine) -> None:
    add_spaces(hub, 1)
    hub.fail("GET", "/api/spaces", Fault(hang_s=0.5))

    first = syncer.start()

    assert first.status == SyncStatus.RUNNING
    with pytest.raises(ConflictError):
        syncer.run()
    wait_until(lambda: not syncer.running)
    with Session(engine) as session:
        assert get_sync_run(session, first.id).status == SyncStatus.OK
