"""The browser tests' Chromium (one per test module) and a fresh page of it per test, its console kept.

What a failing browser test prints besides its assertion: the page's last console lines, the requests the page had
sent and not yet seen answered, and, for a test that ran on past a page wait, every thread's stack at each such wait
(envhub serves in the test's own process, so its event loop and workers are among them)."""

import faulthandler
import sys
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
    pending: dict[Any, str] = {}
    page.on("console", lambda message: page.console.append(message.text))
    page.on("pageerror", lambda error: page.console.append(f"pageerror: {error}"))
    page.on("request", lambda request: pending.__setitem__(request, f"{request.method} {request.url}"))
    page.on("requestfinished", lambda request: pending.pop(request, None))
    page.on("requestfailed", lambda request: pending.pop(request, None))
    page.set_default_timeout(WAIT)
    faulthandler.dump_traceback_later(WAIT / 1000, repeat=True, file=sys.stderr)
    try:
        yield page
    finally:
        faulthandler.cancel_dump_traceback_later()
        print("browser console:", *page.console[-40:], sep="\n  ")  # shown when the test fails
        print("requests unanswered:", *pending.values(), sep="\n  ")
        context.close()
