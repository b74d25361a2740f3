"""The API tab of a built-in template, in a real browser: it says it is reading the schemas while its app is probed,
shows them when the probe ends, and keeps them with the revision, so that a later start shows them at once and a
changed folder is read anew."""

from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from tests.conftest import needs
from tests.environments import write_count_env
from tests.serving import Envhub
from tests.ui.browser import chromium_available, expect, open_page

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]


def probed_template(folder: Path, record: Path) -> None:
    """The count template, whose app notes each time it is imported (the probe imports it once)."""
    write_count_env(folder)
    app = folder / "server" / "app.py"
    app.write_text(app.read_text() + f"\nimport pathlib\npathlib.Path({str(record)!r}).open('a').write('probed\\n')\n")


def schemas_shown(settings: Settings, page: Any) -> None:
    envhub = Envhub(settings, ui=True)
    try:
        open_page(page, envhub.url + "/?env=template:count")
        page.get_by_role("tab", name="API").click()
        expect(page.locator("#env-api table.schema").first).to_contain_text("add")
        expect(page.locator("#env-api [data-reading]")).to_have_count(0)
    finally:
        envhub.stop()


def test_the_api_tab_reads_a_templates_schemas_once_per_revision(
    settings: Settings, templates_dir: Path, tmp_path: Path, page: Any
) -> None:
    record = tmp_path / "probes.log"
    probed_template(templates_dir / "count", record)
    settings = settings.model_copy(update={"data_dir": tmp_path / "data"})

    def probes() -> int:
        return len(record.read_text().splitlines()) if record.exists() else 0

    envhub = Envhub(settings, ui=True)
    try:
        open_page(page, envhub.url + "/?env=template:count")
        page.get_by_role("tab", name="API").click()
        expect(page.locator("#env-api [data-reading=schemas]")).to_be_visible()  # while its app is probed
        expect(page.locator("#env-api table.schema").first).to_contain_text("add")
        expect(page.locator("#env-api [data-reading]")).to_have_count(0)
    finally:
        envhub.stop()
    assert probes() == 1

    schemas_shown(settings, page)  # a second start on the same catalog: the same revision, not probed again
    assert probes() == 1

    readme = templates_dir / "count" / "README.md"
    first = readme.read_text()
    readme.write_text(first + "\nA new revision.\n")
    schemas_shown(settings, page)  # the folder changed: its app is read anew
    assert probes() == 2

    readme.write_text(first)
    schemas_shown(settings, page)  # back to the first revision: what its app said then, at once
    assert probes() == 2
