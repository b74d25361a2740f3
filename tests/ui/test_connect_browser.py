"""The Connect panel in a real browser: its Agents (MCP) tab gives each harness the endpoint's MCP URL, with the
placeholder URL before an endpoint runs, and openenv's MCP client tab stays for MCP environments only."""

from collections.abc import Iterator
from typing import Any

import pytest

from app.settings import REPO_ROOT, Settings
from tests.conftest import needs
from tests.serving import Envhub
from tests.ui.browser import LAUNCH_S, chromium_available, expect, open_page, screenshot

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]


@pytest.fixture(scope="module")
def envhub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    scratch = tmp_path_factory.mktemp("connect-ui")
    settings = Settings(
        database_url=f"sqlite:///{scratch / 'envhub.db'}",
        data_dir=scratch / "data",
        templates_dir=REPO_ROOT / "spaces_templates",
        hf_endpoint="http://127.0.0.1:9",
        sync_interval_s=0,
        health_interval_s=0,
        launch_timeout_s=LAUNCH_S / 1000,
    )
    server = Envhub(settings, ui=True)
    yield server
    server.stop()


def open_agents_tab(page: Any, url: str) -> None:
    open_page(page, url)
    page.get_by_role("tab", name="Connect").click()
    page.get_by_role("tab", name="Agents (MCP)").click()


def test_agents_tab_gives_the_endpoints_mcp_url(envhub: Envhub, page: Any) -> None:
    open_agents_tab(page, envhub.url + "/?env=template:maze")
    claude = page.locator("#snippet-claude-code")
    expect(claude).to_contain_text(
        "claude mcp add --transport http maze http://127.0.0.1:7860/endpoints/ENDPOINT_ID/mcp"
    )
    expect(page.get_by_role("tab", name="MCP", exact=True)).to_have_count(0)

    endpoint = envhub.launch("template:maze")
    running = envhub.wait_status(endpoint["id"], "running", "failed", timeout_s=LAUNCH_S / 1000)
    assert running["status"] == "running", running["message"]
    open_agents_tab(page, envhub.url + "/?env=template:maze")
    expect(claude).to_contain_text(f"claude mcp add --transport http maze {running['url']}/mcp")
    expect(page.locator("#snippet-codex")).to_contain_text(f'url = "{running["url"]}/mcp"')
    expect(page.locator("#snippet-mcp-inspector")).to_contain_text("--method tools/list")
    expect(page.locator("#snippet-claude-desktop")).to_contain_text('"mcp-remote"')
    screenshot(page, "connect-agents")
