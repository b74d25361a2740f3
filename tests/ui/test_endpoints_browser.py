"""Managing endpoints from the page, in a real browser: Launch locally reuses your running endpoint, My endpoints
lists it with its URL to copy, Open in Play and Stop, and the limit of endpoints points there; an endpoint launched
from Play and left goes after the idle time of play."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from tests.conftest import needs
from tests.serving import Envhub
from tests.ui.browser import (
    LAUNCH_S,
    chromium_available,
    expect,
    launch_and_connect,
    offline_settings,
    open_page,
    screenshot,
)

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]


@pytest.fixture(scope="module")
def envhub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    server = Envhub(settings_in(tmp_path_factory.mktemp("endpoints-ui")), ui=True)
    yield server
    server.stop()


def settings_in(scratch: Path, **changed: Any) -> Settings:
    return offline_settings(scratch, **({"launch_timeout_s": LAUNCH_S / 1000, "max_endpoints_per_owner": 1} | changed))


def active(envhub: Envhub) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = envhub.http.get("/api/endpoints").json()["data"]
    return [e for e in listed if e["status"] in ("starting", "running")]


def test_launch_reuses_your_endpoint_and_my_endpoints_manages_it(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:maze")
    launch_and_connect(page)
    [endpoint] = active(envhub)
    url = f"{envhub.url}/endpoints/{endpoint['id']}"

    page.reload()  # a new page: Play connects to the running endpoint by itself, and Launch locally reuses it
    open_page(page, envhub.url + "/?env=template:maze")
    page.locator("#open-play").click()
    expect(page.locator("#play-status")).to_contain_text(f"Connected to {url}")
    page.locator("#play-launch").click()
    expect(page.locator("#play-status")).to_contain_text("which was running already")
    assert [e["id"] for e in active(envhub)] == [endpoint["id"]]

    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.get_by_role("tab", name="My endpoints").click()
    row = page.locator(f'#my-endpoints tr[data-endpoint="{endpoint["id"]}"]')
    expect(row).to_contain_text("template:maze")
    expect(row).to_contain_text(endpoint["revision"][:12])
    expect(row).to_contain_text("running")
    expect(row).to_contain_text("1 replica ·")
    row.locator("button[data-action=copy]").click()
    expect(row.locator("button[data-action=copy]")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == url
    screenshot(page, "my-endpoints")

    page.reload()
    open_page(page, envhub.url + "/")
    page.get_by_role("tab", name="My endpoints").click()
    row.locator("button[data-action=play]").click()  # Open in Play: the environment, connected, in the Play tab
    expect(page.locator("#play-title")).to_contain_text("Maze")
    expect(page.locator("#play-status")).to_contain_text(f"Connected to {url}")

    open_page(page, envhub.url + "/?env=template:wordle")  # the limit is one endpoint: the page says where to stop it
    page.locator("#open-play").click()
    page.locator("#play-launch").click()
    expect(page.locator("#play-status")).to_contain_text("stop one in My endpoints")
    assert "DELETE" not in page.locator("#play-status").inner_text()

    page.get_by_role("tab", name="My endpoints").click()
    row.locator("button[data-action=stop]").click()
    expect(page.locator("#my-endpoints-message")).to_contain_text(f"Stopped {endpoint['id']}")
    expect(row).to_have_count(0)
    assert active(envhub) == []


PLAY_IDLE_S = 3  # longer than a launch's gap between running and the tab's connect


def test_an_endpoint_launched_from_play_and_left_goes_after_the_idle_time_of_play(tmp_path: Path, page: Any) -> None:
    envhub = Envhub(settings_in(tmp_path, max_endpoints_per_owner=2, play_idle_s=PLAY_IDLE_S), ui=True)
    try:
        elsewhere = envhub.running("template:wordle")  # launched through the API: the long idle time
        open_page(page, envhub.url + "/?env=template:maze")
        launch_and_connect(page)
        [played] = [e for e in active(envhub) if e["id"] != elsewhere["id"]]
        page.locator("#play-launch").click()  # again: the same endpoint, which the tab keeps awake while it plays
        expect(page.locator("#play-status")).to_contain_text("which was running already")
        assert sorted(e["id"] for e in active(envhub)) == sorted([played["id"], elsewhere["id"]])

        page.goto("about:blank")  # the tab goes, and its session with it
        stopped = envhub.wait_status(played["id"], "stopped", "failed", timeout_s=PLAY_IDLE_S + 30)
        assert stopped["status"] == "stopped"
        assert [(e["id"], e["for_play"]) for e in active(envhub)] == [(elsewhere["id"], False)]
        assert stopped["for_play"] is True
    finally:
        envhub.stop()
