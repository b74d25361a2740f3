"""The statistical lane in a real browser: the Quality tab runs it on the running endpoint with a model preset
picked, shows the report check by check with its figures and remediation, the per-task difficulty, and evidence
episodes that open in the episode viewer."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from tests.conftest import needs
from tests.fakemodel import FakeModel, Reply
from tests.serving import Envhub
from tests.statenvs import write_stat_env
from tests.ui.browser import choose, chromium_available, expect, open_page, screenshot

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]
SMALL = {"statistical_episodes": 4, "statistical_k": 4, "statistical_group_size": 4, "statistical_replays": 1}


@pytest.fixture(scope="module")
def envhub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    scratch: Path = tmp_path_factory.mktemp("statistical-ui")
    write_stat_env(scratch / "envs" / "known_rates", "known_rates")
    model = FakeModel(lambda body: Reply(text='{"x": 1}'))
    settings = Settings(
        database_url=f"sqlite:///{scratch / 'envhub.db'}",
        data_dir=scratch / "data",
        templates_dir=scratch / "none",
        extra_templates=str(scratch / "envs"),
        hf_endpoint="http://127.0.0.1:9",
        sync_interval_s=0,
        health_interval_s=0,
        allow_private_urls=True,
    ).model_copy(update=SMALL)
    server = Envhub(settings, ui=True)
    saved = server.http.put("/api/models/one", json={"base_url": model.url, "model": "one"})
    assert saved.status_code in (200, 201), saved.text
    yield server
    server.end_endpoints()
    server.stop()
    model.close()


def test_the_quality_tab_runs_the_lane_and_shows_what_it_measured(envhub: Envhub, page: Any) -> None:
    envhub.running("template:known_rates")
    open_page(page, envhub.url + "/?env=template:known_rates")
    page.get_by_role("tab", name="Quality").click()
    section = page.locator("#env-statistical")
    expect(section).to_contain_text("No statistical report yet")
    choose(page, "statistical-presets", "one")
    page.locator("#statistical-run").click()
    expect(section.locator(".statistical-verdict")).to_contain_text("Teaches:", timeout=180_000)

    reports = envhub.http.get("/api/checks", params={"environment": "template:known_rates", "suite": "statistical"})
    filed = reports.json()["data"][0]
    assert filed["report"]["statistics"]["settings"]["presets"] == ["one"]
    for result in filed["report"]["results"]:
        row = section.locator(f'tr[data-check="{result["check_id"]}"]')
        expect(row).to_contain_text(result["status"])
        if result["status"] != "pass" and result["remediation"]:
            expect(row).to_contain_text(result["remediation"][:40])
    signal = section.locator('tr[data-check="statistical.training_signal"]')
    expect(signal).to_contain_text("share_of_groups")
    players = section.locator(".statistical-players tr[data-player]")
    expect(players).to_have_count(len(filed["report"]["statistics"]["players"]))
    expect(section.locator('tr[data-player="model:one"]')).to_contain_text("[")  # the Wilson interval
    tasks = section.locator(".statistical-tasks tr[data-task]")
    expect(tasks).to_have_count(4)
    expect(section.locator('.statistical-tasks tr[data-task="seed:2"]')).to_contain_text("2/4")
    screenshot(page, "statistical-report")

    link = section.locator('tr[data-check="statistical.reward_reachability"] a.statistical-episode').first
    href = link.get_attribute("href")
    assert href is not None and href.startswith("/?episode=")
    viewer = page.context.new_page()
    open_page(viewer, envhub.url + href)
    expect(viewer.locator("#eval-viewer")).to_contain_text(href.split("=", 1)[1])
    assert not [m for m in page.console if "pageerror" in m]
