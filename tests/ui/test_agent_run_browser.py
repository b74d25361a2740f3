"""An agent run's link opens its page: the model calls beside the door's steps, as a browser shows them."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from app.settings import Settings
from tests.conftest import needs
from tests.serving import Envhub
from tests.test_agent_exports import agent_run, opencode
from tests.ui.browser import chromium_available, expect, open_page

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]


@pytest.fixture
def served(settings: Settings, tmp_path: Path) -> Iterator[Envhub]:
    server = Envhub(settings.model_copy(update={"data_dir": tmp_path / "data"}), ui=True)
    with Session(server.services.engine) as session:
        session.add(agent_run("ar-link00000001", "opencode", None, None, 3))  # sign-in is off: nobody's is shown
        session.add_all(opencode("ar-link00000001"))
        session.commit()
    yield server
    server.stop()


def test_an_agent_runs_link_opens_its_page(served: Envhub, page: Any) -> None:
    open_page(page, f"{served.url}/?agent_run=ar-link00000001")
    view = page.locator("#agent-run-view")
    expect(view.locator(".agent-calls")).to_contain_text("Solved: crane.")
    expect(view.locator(".agent-calls")).to_contain_text("envhub_guess")
    expect(view).to_contain_text("no reward")
    expect(view.locator(".agent-steps")).to_contain_text("No door episode")
    expect(page.locator("#agent-run-id textarea, #agent-run-id input").first).to_have_value("ar-link00000001")

    open_page(page, f"{served.url}/?agent_run=ar-nothing")  # no such run: the page says so, and shows none
    expect(page.locator("#agent-run-id textarea, #agent-run-id input").first).to_have_value("ar-nothing")
    expect(page.locator("#agent-run-view p")).to_have_count(1)
    expect(page.locator("#agent-run-view .agent-run")).to_have_count(0)
