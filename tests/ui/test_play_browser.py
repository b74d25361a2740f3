"""Playing from the forms in a real browser: every kind of action field takes input, and what comes back is shown
as its board where it is one. envhub launches the built-in templates for real with the process backend."""

from collections.abc import Iterator
from typing import Any

import pytest

from app.settings import REPO_ROOT, Settings
from tests.conftest import needs
from tests.serving import Envhub
from tests.ui.browser import (
    LAUNCH_S,
    choose,
    chromium_available,
    expect,
    field,
    history_rows,
    launch_and_connect,
    open_page,
    reset,
    screenshot,
    steps_become,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]


@pytest.fixture(scope="module")
def envhub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    scratch = tmp_path_factory.mktemp("play-ui")
    settings = Settings(
        database_url=f"sqlite:///{scratch / 'envhub.db'}",
        data_dir=scratch / "data",
        templates_dir=REPO_ROOT / "spaces_templates",
        hf_endpoint="http://127.0.0.1:9",
        sync_interval_s=0,
        health_interval_s=0,
        launch_timeout_s=LAUNCH_S / 1000,
        max_endpoints_per_owner=10,
    )
    server = Envhub(settings, ui=True)
    yield server
    server.stop()


def test_the_maze_is_walked_with_its_direction_dropdown(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:maze")
    launch_and_connect(page)
    field(page, "play-seed").fill("1")  # seed 1: a wall above and to the right of the start, a corridor below
    reset(page)
    direction = page.locator("#field-direction input")
    expect(direction).to_be_enabled()
    choose(page, "field-direction", "down")
    page.locator("#play-step").click()
    steps_become(page, 1)
    expect(page.locator("#play-observation")).to_contain_text("You moved down.")
    choose(page, "field-direction", "right")
    page.locator("#play-step").click()
    steps_become(page, 2)
    expect(page.locator("#play-errors")).to_contain_text("There is a wall right of you")
    expect(history_rows(page).first).to_contain_text('"direction": "right"')
    screenshot(page, "play-maze")


def test_a_templates_api_and_tasks_show_before_any_launch(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:arithmetic_tasks")
    page.get_by_role("tab", name="API").click()
    expect(page.locator("#env-api")).to_contain_text("Task API")
    expect(page.locator("#env-api table").first).to_contain_text("answer")
    page.get_by_role("tab", name="Tasks").click()
    expect(page.locator("#env-tasks")).to_contain_text("Task API splits")
    expect(page.locator("#env-tasks")).to_contain_text("test-0000")
    launched = [e["environment"] for e in envhub.http.get("/api/endpoints").json()["data"]]
    assert "template:arithmetic_tasks" not in launched  # read from the source: nothing was launched


def test_play_connects_to_a_url_typed_in_and_says_why_it_cannot(envhub: Envhub, page: Any) -> None:
    endpoint = envhub.running("template:lights_out")
    open_page(page, envhub.url + "/")
    page.get_by_role("tab", name="Play").click()
    url_box = page.locator("#play-url input")
    url_box.fill(envhub.url + "/endpoints/0000000000")  # nothing serves there
    url_box.press("Enter")
    page.locator("#play-connect").click()
    expect(page.locator("#play-status")).to_contain_text(f"Could not connect to {envhub.url}/endpoints/0000000000")
    url_box.fill(endpoint["url"])
    url_box.press("Enter")
    page.locator("#play-connect").click()
    expect(page.locator("#play-status")).to_contain_text(f"Connected to {endpoint['url']}")
    expect(page.locator("#play-title")).to_contain_text(f"Playing the server at {endpoint['url']}")
    reset(page)
    expect(history_rows(page)).to_have_count(1)
