"""The browse page's first cards come with the page itself: they show before any of its events is answered, and each
load of the page keeps what the next one carries current."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from catalog.models import Verdict
from tests.conftest import file_summary, needs
from tests.serving import Envhub
from tests.ui.browser import browser_page, chromium_available, expect, offline_settings, open_page

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]
QUALITY = '.env-card[data-env="template:lights_out"] .badge'


@pytest.fixture
def envhub(tmp_path: Path) -> Iterator[Envhub]:
    server = Envhub(offline_settings(tmp_path), ui=True)
    yield server
    server.stop()


def test_the_first_cards_show_before_any_event_answers_and_each_load_keeps_them_current(envhub: Envhub) -> None:
    with browser_page() as page:
        unanswered(page)
        open_page(page, envhub.url + "/")
        expect(page.locator(".env-card")).to_have_count(6)  # the built-ins, as envhub started
        expect(page.locator(QUALITY, has_text="Quality:")).to_have_count(0)

    file_summary(envhub, "template:lights_out", Verdict.PASS, [])  # the catalog changes, as a filed report does
    with browser_page() as page:
        open_page(page, envhub.url + "/")  # its first event searches again, and shows the change
        expect(page.locator(QUALITY, has_text="Quality:")).to_have_text("Quality: pass")
    with browser_page() as page:
        unanswered(page)
        open_page(page, envhub.url + "/")  # the next page carries it
        expect(page.locator(QUALITY, has_text="Quality:")).to_have_text("Quality: pass")
        expect(page.locator(".env-card")).to_have_count(6)


def test_a_search_typed_while_the_page_loads_is_not_overwritten(envhub: Envhub) -> None:
    with browser_page() as page:
        held: list[Any] = []  # the page's first event, held until the search has shown
        page.route("**/gradio_api/run/predict", lambda route: held.append(route) if not held else route.continue_())
        open_page(page, envhub.url + "/")
        expect(page.locator(".env-card")).to_have_count(6)
        search = page.locator("#search textarea")
        search.fill("wordle")
        search.press("Enter")
        expect(page.locator(".env-card")).to_have_count(1)
        assert len(held) == 1, "the page's first event was not sent"
        # The tag filter's counts are read by the event that follows the first once its answer is shown.
        with page.expect_request(lambda request: "/gradio_api/run/predict" in request.url):
            held[0].continue_()
        assert page.locator(".env-card").count() == 1
        assert page.locator("#search textarea").input_value() == "wordle"


def unanswered(page: Any) -> None:
    """Every request of the page's events fails: what shows came with the page."""
    page.route("**/gradio_api/**", lambda route: route.abort())
