"""What the page says about envhub itself, in a real browser: a Hub sync that failed (when, why, what the offline
catalog holds) with Retry, empty results that say what is indexed, and sign-in offered only where it is on."""

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import REPO_ROOT, Settings
from tests.conftest import needs, space_files, wait_until
from tests.fakehub import FakeHub, Fault
from tests.serving import Envhub
from tests.ui.browser import chromium_available, expect, field, open_page, screenshot

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]


def _settings(tmp_path: Path, hub: FakeHub, **values: Any) -> Settings:
    return Settings(
        database_url=f"sqlite:///{tmp_path / 'envhub.db'}",
        data_dir=tmp_path / "data",
        templates_dir=REPO_ROOT / "spaces_templates",
        hf_endpoint=hub.url,
        health_interval_s=0,
        hub_max_retries=0,
        **values,
    )


@pytest.fixture
def failing_hub(hub: FakeHub) -> FakeHub:
    """A Hub with one chess Space whose listing answers 503 once: envhub's first sync fails."""
    hub.add_space("alice/chess-arena", files=space_files("Chess Arena"))
    hub.fail("GET", "/api/spaces", Fault(status=503))
    return hub


@pytest.fixture
def synced_once(failing_hub: FakeHub, tmp_path: Path) -> Iterator[Envhub]:
    """envhub as `make run` starts it (a sync at start-up, sign-in off, no admin token), after that sync failed."""
    envhub = Envhub(_settings(tmp_path, failing_hub, sync_interval_s=3600), ui=True)
    try:
        wait_until(lambda: (envhub.http.get("/api/health").json()["last_sync"] or {}).get("status") == "failed", 30)
        yield envhub
    finally:
        envhub.stop()


def test_a_failed_sync_shows_on_the_page_and_retry_brings_the_spaces(synced_once: Envhub, page: Any) -> None:
    open_page(page, synced_once.url + "/?q=chess")
    banner = page.locator("#sync-banner")
    expect(banner).to_contain_text("The Hub could not be synced")
    expect(banner).to_contain_text("503")  # why
    expect(banner).to_contain_text("envhub serves its offline catalog: 6 environments (6 built-in)")
    expect(page.locator("#results .empty-state")).to_contain_text(
        "The catalog holds 6 environments: 6 built-in (no Hub Spaces: the last sync with the Hub failed)."
    )
    screenshot(page, "sync-failed")

    page.locator("#sync-retry").click()  # the Hub answers now: the Space is found and the banner says so

    expect(page.locator('.env-card[data-env="alice/chess-arena"]')).to_be_visible()
    expect(page.locator('#sync-banner [data-sync="done"]')).to_be_visible()
    expect(page.locator("#sync-retry")).to_be_hidden()
    field(page, "search").fill("zzzz nothing")
    field(page, "search").press("Enter")
    expect(page.locator("#results .empty-state")).to_contain_text("1 from the Hub")


def test_retry_says_it_started_then_that_it_failed_and_why(
    failing_hub: FakeHub, synced_once: Envhub, page: Any
) -> None:
    held = threading.Event()  # the retried sync's listing waits here, then its connection drops unanswered
    failing_hub.fail("GET", "/api/spaces", Fault(hang_s=60, released=held))
    open_page(page, synced_once.url + "/")
    page.locator("#sync-retry").click()
    expect(page.locator('#sync-banner [data-sync="started"]')).to_be_visible()
    expect(page.locator("#sync-retry")).to_be_disabled()
    held.set()
    expect(page.locator('#sync-banner [data-sync="failed"][data-retried] .sync-why')).not_to_be_empty()
    expect(page.locator("#sync-retry")).to_be_enabled()


def test_retrying_on_a_server_with_an_admin_token_takes_the_token(
    failing_hub: FakeHub, tmp_path: Path, page: Any
) -> None:
    envhub = Envhub(_settings(tmp_path, failing_hub, sync_interval_s=3600, admin_token="s3cret-admin"), ui=True)
    try:
        wait_until(lambda: (envhub.http.get("/api/health").json()["last_sync"] or {}).get("status") == "failed", 30)
        open_page(page, envhub.url + "/")
        expect(page.locator("#sync-banner")).to_contain_text("Retrying takes the admin token")
        field(page, "sync-token").fill("a guess")
        page.locator("#sync-retry").click()
        expect(page.locator("#sync-banner")).to_contain_text("That is not this server's admin token.")
        assert envhub.http.get("/api/sync").json()["count"] == 1  # no sync was started
        field(page, "sync-token").fill("s3cret-admin")
        page.locator("#sync-retry").click()
        expect(page.locator('.env-card[data-env="alice/chess-arena"]')).to_be_visible()
        expect(page.locator('#sync-banner [data-sync="done"]')).to_be_visible()
    finally:
        envhub.stop()


def test_sign_in_is_not_offered_where_it_is_off(hub: FakeHub, tmp_path: Path, page: Any) -> None:
    envhub = Envhub(_settings(tmp_path, hub, sync_interval_s=0), ui=True)
    try:
        open_page(page, envhub.url + "/?env=template:wordle")
        expect(page.locator("#publish-status")).to_contain_text("Hugging Face, which is off on this server")
        expect(page.locator("#publish-status")).to_contain_text("ENVHUB_DEV_LOGIN=true")
        page.locator("#publish-start").click()  # deploying says the same, and links nowhere
        expect(page.locator("#publish-status")).to_contain_text("which is off on this server")
        assert page.locator('a[href^="/auth/login"]').count() == 0
        expect(page.locator("#account")).not_to_contain_text("Sign in")
    finally:
        envhub.stop()
