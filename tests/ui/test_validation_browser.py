"""openenv's validator on the environment page, in a real browser: the Quality tab shows the newest report check by
check with its verdict, policy, openenv version and revision, and links the older ones."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import needs
from tests.serving import Envhub
from tests.ui.browser import browser_page, chromium_available, expect, offline_settings, open_page, screenshot

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]


@pytest.fixture
def envhub(tmp_path: Path) -> Iterator[Envhub]:
    server = Envhub(offline_settings(tmp_path, quality_interval_s=0, validator_interval_s=0), ui=True)
    yield server
    server.stop()


def test_the_quality_tab_shows_the_validators_report_check_by_check(envhub: Envhub) -> None:
    static = envhub.http.post("/api/environments/template:wordle/validation", json={"level": "static"})
    deeper = envhub.http.post("/api/environments/template:wordle/validation", json={"level": "runtime"})
    assert static.status_code == deeper.status_code == 201, static.text + deeper.text
    newest = deeper.json()

    with browser_page() as page:
        open_page(page, envhub.url + "/?env=template:wordle")
        expect(page.locator("#env-header h1")).to_contain_text("Wordle")
        page.get_by_role("tab", name="Quality").click()
        section = page.locator("#env-validation")
        verdict = section.locator('.validation-verdict[data-suite="openenv"]')
        expect(verdict).to_contain_text(newest["verdict"])
        expect(verdict).to_contain_text("policy v2")
        expect(verdict).to_contain_text("openenv 0.10.0")
        expect(verdict).to_contain_text(newest["revision"][:12])
        results = newest["report"]["results"]
        expect(section.locator("tr[data-check]")).to_have_count(len(results))
        for result in results:
            row = section.locator(f'tr[data-check="{result["check_id"]}"]')
            expect(row).to_contain_text(result["status"])
            expect(row).to_contain_text(result["evidence"][0])
        expect(section.locator(f'a[href="/api/validation/{static.json()["id"]}"]')).to_have_count(1)
        screenshot(page, "validation-section")
