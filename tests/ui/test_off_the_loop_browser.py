"""No tab of the page runs SQL on envhub's event loop, on which the gateway relays every session: each tab's
handlers read the catalog, the endpoints and the runs off it, in a real browser against a real envhub."""

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import needs
from tests.serving import Envhub
from tests.ui.browser import (
    LAUNCH_S,
    chromium_available,
    expect,
    field,
    offline_settings,
    open_page,
    reset,
    steps_become,
)

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]


@pytest.fixture(scope="module")
def envhub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    scratch = tmp_path_factory.mktemp("off-the-loop-ui")
    settings = offline_settings(scratch, launch_timeout_s=LAUNCH_S / 1000, max_endpoints_per_owner=10)
    server = Envhub(settings, ui=True)
    yield server
    server.end_endpoints()
    server.stop()


def test_the_play_tabs_handlers_run_no_sql_on_the_event_loop(envhub: Envhub, page: Any) -> None:
    """Opening an environment that runs, playing it, launching it (which finds it running) and connecting again."""
    envhub.running("template:wordle")
    with envhub.sql_on_the_loop() as on_the_loop:
        open_page(page, envhub.url + "/?env=template:wordle")
        expect(page.locator(".env-header h1")).to_contain_text("Wordle")
        page.locator("#open-play").click()  # this tab plays nothing yet: it connects to the running endpoint
        expect(page.locator("#play-status")).to_contain_text("Connected to")
        expect(page.locator("#play-url input")).to_have_value(re.compile(r"/endpoints/"))
        reset(page)
        field(page, "field-guess").fill("crane")
        page.locator("#play-step").click()
        steps_become(page, 1)
        page.locator("#play-launch").click()  # the endpoint this tab plays: the episode goes on
        expect(page.locator("#play-status")).to_contain_text("which was running already")
        expect(page.locator("#play-status")).to_contain_text("The episode goes on")
        field(page, "field-guess").fill("slate")
        page.locator("#play-step").click()
        steps_become(page, 2)
        page.locator("#play-connect").click()
        expect(page.locator("#play-status")).not_to_contain_text("running already")
        expect(page.locator("#play-status")).to_contain_text("Connected to")
    assert [statement for statement, _ in on_the_loop] == []


def test_every_other_tabs_handlers_run_no_sql_on_the_event_loop(envhub: Envhub, page: Any) -> None:
    """Browse, Environment, Evaluate (on the running endpoint), Launch, My endpoints (Open in Play, Stop), Agent run
    and Board, each used as a visitor would."""
    running = envhub.running("template:wordle")
    with envhub.sql_on_the_loop() as on_the_loop:
        open_page(page, envhub.url + "/?q=maze")
        expect(page.locator(".env-card")).to_have_count(1)
        page.locator(".env-card", has_text="Maze").click()
        expect(page.locator(".env-header h1")).to_contain_text("Maze")
        page.get_by_role("tab", name="Tasks").click()
        expect(page.locator("#env-tasks")).not_to_be_empty()

        page.locator("#open-launch").click()
        expect(page.locator("#launch-environment")).to_contain_text("template:maze")
        page.locator("#launch-start").click()
        expect(page.locator("#launch-status")).to_contain_text("running", timeout=LAUNCH_S)

        open_page(page, envhub.url + "/?env=template:wordle")
        page.locator("#open-evaluate").click()
        expect(page.locator("#eval-environment")).to_contain_text("template:wordle")
        for name, value in (("eval-episodes", "1"), ("eval-max-steps", "2")):
            expect(field(page, name)).to_be_visible()
            field(page, name).fill(value)
            expect(field(page, name)).to_have_value(value)
        page.locator("#eval-run").click()
        expect(page.locator("#eval-progress")).to_contain_text("finished", timeout=LAUNCH_S)
        page.locator("#eval-push").click()  # sign-in is off: the note says how to push
        expect(page.locator("#eval-push-message code", has_text="HF_TOKEN")).to_be_visible()
        page.locator("#eval-results [role=row]:not(thead [role=row])").first.locator(
            "[role=gridcell], td"
        ).first.click()
        expect(page.locator("#eval-viewer")).to_contain_text("reset")

        page.get_by_role("tab", name="My endpoints").click()
        row = page.locator(f'#my-endpoints tr[data-endpoint="{running["id"]}"]')
        row.locator("button[data-action=play]").click()  # Open in Play
        expect(page.locator("#play-title")).to_contain_text("Wordle")
        expect(page.locator("#play-status")).to_contain_text("Connected to")
        page.get_by_role("tab", name="My endpoints").click()
        maze = page.locator("#my-endpoints tr", has_text="template:maze")
        maze.locator("button[data-action=stop]").click()
        expect(page.locator("#my-endpoints-message")).to_contain_text("Stopped")

        page.get_by_role("tab", name="Agent run").click()
        field(page, "agent-run-id").fill("ar-nothing")
        page.locator("#agent-run-show").click()
        expect(page.locator("#agent-run-view")).not_to_be_empty()
        page.get_by_role("tab", name="Board").click()
        page.locator("#board-refresh").click()
        expect(page.locator("#board-table")).not_to_be_empty()
    assert [statement for statement, _ in on_the_loop] == []
