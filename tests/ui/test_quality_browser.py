"""Quality reports in a real browser: the verdict badge on cards, the filter and sort by verdict, and the
environment page's Quality section, from a real report of a launched template and summaries filed beside it."""

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from catalog.models import Verdict
from tests.conftest import file_summary, needs
from tests.serving import Envhub
from tests.ui.browser import browser_page, chromium_available, expect, offline_settings, open_page, screenshot

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]
LAUNCH_S = 90


@pytest.fixture(scope="module")
def envhub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    scratch: Path = tmp_path_factory.mktemp("quality-ui")
    server = Envhub(offline_settings(scratch, launch_timeout_s=LAUNCH_S), ui=True)
    yield server
    server.stop()


@pytest.fixture
def page(envhub: Envhub) -> Iterator[Any]:
    with browser_page() as page:
        yield page


def cards(page: Any) -> list[str]:
    return [str(card.get_attribute("data-env")) for card in page.locator(".env-card").all()]


def test_badges_filter_sort_and_the_quality_section(envhub: Envhub, page: Any) -> None:
    endpoint = envhub.running("template:maze")
    response = envhub.http.post("/api/checks", json={"endpoint": endpoint["id"], "suite": "quality"}, timeout=90)
    assert response.status_code == 201, response.text
    filed = response.json()
    verdicts = {"template:maze": Verdict(filed["verdict"]), "template:connect_four": Verdict.PASS}
    verdicts["template:wordle"] = Verdict.FAIL
    file_summary(envhub, "template:connect_four", Verdict.PASS, [])
    file_summary(envhub, "template:wordle", Verdict.FAIL, ["runtime.episode_determinism", "runtime.seed_control"])

    open_page(page, envhub.url + "/")
    expect(page.locator(".env-card")).to_have_count(6)
    for environment_id, verdict in verdicts.items():
        badge = page.locator(f'.env-card[data-env="{environment_id}"] .badge', has_text="Quality:")
        expect(badge).to_have_text(f"Quality: {verdict.value}")
    wordle = page.locator('.env-card[data-env="template:wordle"] .badge', has_text="Quality:")
    expect(wordle).to_have_attribute("title", "Quality report of " + datetime.now(UTC).strftime("%Y-%m-%d") + (
        ": failing runtime.episode_determinism, runtime.seed_control"
    ))  # fmt: skip
    expect(page.locator('.env-card[data-env="template:lights_out"] .badge', has_text="Quality:")).to_have_count(0)

    page.locator("#sort input").first.click()
    page.get_by_role("option", name="Quality", exact=True).click()
    # Pass, warn, fail, then the unreported; templates tie on trending and likes, so then by id.
    ranked = sorted(verdicts, key=lambda e: (list(Verdict).index(verdicts[e]), e))
    for place, environment_id in enumerate(ranked):
        expect(page.locator(".env-card").nth(place)).to_have_attribute("data-env", environment_id)

    page.locator("#quality input").first.click()
    page.get_by_role("option", name="Fails", exact=True).click()
    failing = sorted(e for e, v in verdicts.items() if v == Verdict.FAIL)
    expect(page.locator(".env-card")).to_have_count(len(failing))
    assert sorted(cards(page)) == failing
    screenshot(page, "quality-filter")

    open_page(page, envhub.url + "/?env=template:maze")
    expect(page.locator("#env-header h1")).to_contain_text("Maze")
    page.get_by_role("tab", name="Quality").click()
    section = page.locator("#env-quality")
    expect(section.locator(".quality-verdict")).to_contain_text(f"Quality: {verdicts['template:maze'].value}")
    checks = filed["report"]["results"]
    expect(section.locator("tr[data-check]")).to_have_count(len(checks))
    for check in checks:
        row = section.locator(f'tr[data-check="{check["check_id"]}"]')
        expect(row).to_contain_text(check["status"])
        for line in check["evidence"][:1]:
            expect(row).to_contain_text(line)
    expect(section).to_contain_text("Operational figures")
    expect(section.locator(".quality-figures")).to_contain_text("Steps per second, 1 session")
    expect(section.locator(f'a[href="/api/checks/{filed["id"]}"]')).to_be_visible()
    screenshot(page, "quality-section")

    open_page(page, envhub.url + "/?env=template:lights_out")
    expect(page.locator("#env-header h1")).to_contain_text("Lights")
    page.get_by_role("tab", name="Quality").click()
    expect(page.locator("#env-quality")).to_contain_text("No quality report yet")
    page.locator("#quality-run").click()  # it runs nowhere: the section says what to do first
    expect(page.locator("#env-quality")).to_contain_text("It runs nowhere yet")
    envhub.running("template:lights_out")
    page.locator("#quality-run").click()  # now on its running endpoint, filed, and shown
    expect(page.locator("#env-quality .quality-verdict")).to_contain_text("Quality:", timeout=LAUNCH_S * 1000)
    reports = envhub.http.get("/api/checks", params={"environment": "template:lights_out", "suite": "quality"})
    assert reports.json()["count"] == 1
