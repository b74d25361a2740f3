"""Waking a sleeping Space from its environment page, in a real browser, with an envhub of its own (on its own:
a test module's envhub and this one are not both serving a page in one process)."""

from pathlib import Path

import pytest

from app.settings import Settings
from tests.conftest import ADMIN_TOKEN, needs, space_files, wait_until
from tests.fakehub import FakeHub
from tests.serving import Envhub
from tests.ui.browser import browser_page, chromium_available, expect, open_page

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]


def _health(envhub: Envhub, environment_id: str) -> str | None:
    health = envhub.http.get(f"/api/environments/{environment_id}").json().get("health") or {}
    status: str | None = health.get("status")
    return status


def test_a_sleeping_space_is_woken_on_request(hub: FakeHub, space_app: str, tmp_path: Path) -> None:
    hub.add_space("alice/sleepy", files=space_files("Sleepy"), stage="SLEEPING")
    hub.set_host("alice/sleepy", space_app)  # where the Space answers once awake
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'wake.db'}",
        data_dir=tmp_path / "data",
        templates_dir=tmp_path / "no-templates",
        hf_endpoint=hub.url,
        admin_token=ADMIN_TOKEN,
        sync_interval_s=0,
        health_interval_s=0,
        allow_private_urls=True,  # the stand-in Space runs on loopback
    )
    envhub = Envhub(settings, ui=True)
    try:
        synced = envhub.http.post("/api/sync?wait=true", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert synced.json()["added"] == 1
        with browser_page() as page:
            open_page(page, envhub.url + "/?env=alice/sleepy")
            expect(page.locator("#env-header h1")).to_contain_text("Sleepy")
            wake = page.locator("#env-wake")
            expect(wake).to_be_visible()
            # Once the page has read the tasks, its refresh is done: what follows the click is the click's alone.
            page.get_by_role("tab", name="Tasks").click()
            expect(page.locator("#env-tasks")).to_contain_text("What it can be evaluated on")
            expect(page.locator("#env-tasks")).not_to_contain_text("Reading its tasks")

            wake.click()

            expect(page.locator("#env-status")).to_contain_text("Waking the Space")
            expect(wake).to_be_hidden()
        wait_until(lambda: _health(envhub, "alice/sleepy") == "up", timeout_s=60)
    finally:
        envhub.stop()
