"""The API's documentation pages in a browser with nothing but envhub to reach: /docs and /redoc load their
scripts, styles and fonts from envhub itself (a package on the index), never from a CDN. (ReDoc's footer links an
image of its maker's logo from its site; offline it is simply not drawn.)"""

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from app.settings import Settings
from tests.conftest import needs
from tests.serving import Envhub
from tests.ui.browser import chromium_available, expect

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]


@pytest.fixture
def envhub(settings: Settings) -> Iterator[Envhub]:
    served = Envhub(settings)
    try:
        yield served
    finally:
        served.stop()


def _offline(page: Any) -> list[str]:
    """Every request the page makes beyond 127.0.0.1 is refused, as without a network; the list of the refused ones
    the page needs to work (its scripts, styles, fonts and data)."""
    refused: list[str] = []

    def route(request_route: Any) -> None:
        url = request_route.request.url
        if urlsplit(url).hostname == "127.0.0.1" or url.startswith("data:"):
            request_route.continue_()
        else:
            if request_route.request.resource_type != "image":
                refused.append(url)
            request_route.abort()

    page.route("**/*", route)
    return refused


@pytest.mark.parametrize(("path", "operation"), [("/docs", ".opblock-summary-path"), ("/redoc", "[data-section-id]")])
def test_the_api_docs_show_the_operations_without_a_network(
    envhub: Envhub, page: Any, path: str, operation: str
) -> None:
    refused = _offline(page)
    page.goto(envhub.url + path)
    expect(page.locator(operation).filter(has_text="/api/environments").first).to_be_visible()
    assert refused == []
