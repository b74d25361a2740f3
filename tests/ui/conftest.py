"""The browser tests' Chromium (one per test module) and a fresh page of it per test, its console kept."""

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ui.browser import WAIT, chromium


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.console = []
    page.on("console", lambda message: page.console.append(message.text))
    page.on("pageerror", lambda error: page.console.append(f"pageerror: {error}"))
    page.set_default_timeout(WAIT)
    yield page
    print("browser console:", *page.console[-40:], sep="\n  ")  # shown when the test fails
    context.close()
