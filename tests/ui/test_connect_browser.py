"""The Connect panel in a real browser: its Agents (MCP) tab gives each harness the endpoint's MCP URL, with the
placeholder URL before an endpoint runs, and openenv's MCP client tab stays for MCP environments only. Every snippet
names where envhub is reached (its own origin, or ENVHUB_PUBLIC_URL), before and after a launch, and a launch from
the Launch tab shows in the panel without a reload."""

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import needs
from tests.serving import Envhub
from tests.ui.browser import LAUNCH_S, chromium_available, expect, field, offline_settings, open_page, screenshot

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]


def serve(scratch: Path, **settings: Any) -> Envhub:
    return Envhub(offline_settings(scratch, **({"launch_timeout_s": LAUNCH_S / 1000} | settings)), ui=True)


@pytest.fixture(scope="module")
def envhub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    server = serve(tmp_path_factory.mktemp("connect-ui"))  # on a free port, never 7860
    yield server
    server.stop()


def open_agents_tab(page: Any, url: str) -> None:
    open_page(page, url)
    page.get_by_role("tab", name="Connect").click()
    page.get_by_role("tab", name="Agents (MCP)").click()


def test_agents_tab_gives_the_endpoints_mcp_url(envhub: Envhub, page: Any) -> None:
    open_agents_tab(page, envhub.url + "/?env=template:maze")
    claude = page.locator("#snippet-claude-code")
    expect(claude).to_contain_text(f"claude mcp add --transport http maze {envhub.url}/endpoints/ENDPOINT_ID/mcp")
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


def open_connect_tab(page: Any) -> None:
    page.get_by_role("tab", name="Environment").click()
    page.get_by_role("tab", name="Connect").click()


def test_a_launch_from_the_launch_tab_shows_in_the_connect_panel(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:lights_out")
    page.get_by_role("tab", name="Connect").click()
    python = page.locator("#snippet-python")
    expect(python).to_contain_text(f'base_url="{envhub.url}/endpoints/ENDPOINT_ID"')  # the origin the page is on
    expect(field(page, "connect-url")).to_have_value("")
    page.locator("#open-launch").click()
    page.locator("#launch-start").click()
    expect(field(page, "launch-url")).to_have_value(re.compile(re.escape(envhub.url) + "/endpoints/"), timeout=LAUNCH_S)
    url = field(page, "launch-url").input_value()
    open_connect_tab(page)  # the same page: no reload
    expect(field(page, "connect-url")).to_have_value(url)
    expect(python).to_contain_text(f'base_url="{url}"')
    page.get_by_role("tab", name="TRL").click()
    expect(page.locator("#snippet-trl")).to_contain_text(f'ENV_URL = "{url}"')
    page.get_by_role("tab", name="Agents (MCP)").click()
    expect(page.locator("#snippet-claude-code")).to_contain_text(f"{url}/mcp")
    screenshot(page, "connect-after-launch")


def test_snippets_name_the_public_url(tmp_path: Path, page: Any) -> None:
    public = "https://envhub.example.org"
    server = serve(tmp_path, public_url=public)
    try:
        open_page(page, server.url + "/?env=template:maze")  # reached on loopback, served to users at `public`
        page.get_by_role("tab", name="Connect").click()
        expect(page.locator("#snippet-python")).to_contain_text(f'base_url="{public}/endpoints/ENDPOINT_ID"')
        endpoint = server.running("template:maze")
        assert endpoint["url"].startswith(public + "/endpoints/")
        open_page(page, server.url + "/?env=template:maze")
        page.get_by_role("tab", name="Connect").click()
        expect(field(page, "connect-url")).to_have_value(endpoint["url"])
        expect(page.locator("#snippet-python")).to_contain_text(f'base_url="{endpoint["url"]}"')
        page.get_by_role("tab", name="Agents (MCP)").click()
        expect(page.locator("#snippet-codex")).to_contain_text(f'url = "{endpoint["url"]}/mcp"')
    finally:
        server.stop()
