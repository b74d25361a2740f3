"""A real browser for the UI tests: Playwright driving the system Chromium (never a downloaded one)."""

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.settings import REPO_ROOT, Settings

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(os.environ.get("ENVHUB_UI_ARTIFACTS", REPO_ROOT / "artifacts" / "ui"))
WAIT = 45_000  # ms a page may take to show what a test expects: Gradio renders after its queue answers, and a fresh
# page takes 3-5 s on an idle 2-core machine, several times that while the other tests load it
LAUNCH_S = 90_000  # ms: a first launch may build the template's virtualenv


def chromium_available() -> bool:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return Path(CHROMIUM).is_file()


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium; yields Playwright's Browser."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def offline_settings(scratch: Path, **changed: Any) -> Settings:
    """A browser test's envhub: its catalog and data in scratch, the built-in templates, a Hub address nothing answers
    at, no background sync or health checks; what `changed` names on top."""
    return Settings(
        database_url=f"sqlite:///{scratch / 'envhub.db'}",
        data_dir=scratch / "data",
        templates_dir=REPO_ROOT / "spaces_templates",
        hf_endpoint="http://127.0.0.1:9",
        sync_interval_s=0,
        health_interval_s=0,
    ).model_copy(update=changed)


@contextmanager
def browser_page() -> Iterator[Any]:
    """A page of its own headless Chromium, at the tests' window size and waits."""
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(WAIT)
        try:
            yield page
        finally:
            context.close()


def open_page(page: Any, url: str) -> None:
    """Go to one of envhub's pages and wait until Gradio has drawn it.

    A page that stays half drawn, with `net::ERR_NETWORK_CHANGED` in the browser's console, lost its queued requests
    to an address that came or went on the machine: a container's IPv6 link-local address, unless the machine gives
    new interfaces none (README, "Development"; `.ci/run` does).
    """
    from playwright.sync_api import Error as NavigationError

    try:
        page.goto(url)
    except NavigationError as exc:
        # The page being left may still navigate itself while the next one is on its way, and Chromium then aborts
        # the pending one: a replaceState of the browse page's search box, typed into a moment before, or Gradio's
        # reload once its stream, dropped by the unload, reconnects (2 s later, so under load the next page may
        # not have arrived yet). A user would follow the link again; so does this, once.
        if "net::ERR_ABORTED" not in exc.message:
            raise
        print(f"going to {url} was aborted by the page being left; going again")
        page.goto(url)
    page.get_by_role("tablist").first.wait_for(state="visible", timeout=WAIT)


def expect(target: Any) -> Any:
    """Playwright's expect, waiting up to WAIT."""
    from playwright.sync_api import expect as playwright_expect

    playwright_expect.set_options(timeout=WAIT)
    return playwright_expect(target)


def screenshot(page: Any, name: str) -> Path:
    """Save a full-page screenshot as a test artifact (CI keeps artifacts/ui)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


# -- the Play tab, as the tests drive it


def field(page: Any, elem_id: str) -> Any:
    """The text input of a Gradio textbox, number or code box."""
    return page.locator(f"#{elem_id}").locator("textarea, input, .cm-content").first


def fill_code(page: Any, elem_id: str, text: str) -> None:
    """Type into a Gradio code box as a person does (its text selected, then keys), and let the page take it in: the
    box's editor hands its text to Gradio's state as the page renders (two animation frames), so a click at once
    could still send the old text. Keys go through the editor's own input handling; a text set into its element
    from outside is read back later, and an update of the editor in between, on a loaded machine, undid it."""
    editor = page.locator(f"#{elem_id} .cm-content")
    editor.click()
    page.keyboard.press("ControlOrMeta+A")
    page.keyboard.insert_text(text)
    expect(editor).to_have_text(text)
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


def choose(page: Any, elem_id: str, option: str) -> None:
    page.locator(f"#{elem_id} input").first.click()
    page.get_by_role("option", name=option, exact=True).click()


def fill_form(page: Any, name: str, value: str) -> None:
    """Fill a field of the action form once the form has been drawn (again) for the current tool."""
    control = field(page, f"field-{name}")
    expect(control).to_be_visible()
    page.wait_for_timeout(300)  # the form is re-rendered server-side; let the last render land
    control.fill(value)
    expect(control).to_have_value(value)


def launch_and_connect(page: Any) -> None:
    # Play is offered once the environment's page has been read, which a loaded machine takes its time over.
    expect(page.locator("#open-play")).to_be_visible(timeout=LAUNCH_S)
    page.locator("#open-play").click()
    page.locator("#play-launch").click()
    expect(page.locator("#play-status")).to_contain_text("Connected to", timeout=LAUNCH_S)


def explain(page: Any) -> None:
    """What the playground said, for the log of a failed test."""
    print("errors:", page.locator("#play-errors").inner_text(), "| status:", page.locator("#play-status").inner_text())


def reset(page: Any) -> None:
    page.locator("#play-reset").click()
    try:
        expect(page.locator("#play-stats")).to_contain_text("steps", timeout=WAIT)
    except AssertionError:
        explain(page)
        raise


def history_rows(page: Any) -> Any:
    return page.locator("#play-history [role=row]:not(thead [role=row])")


def steps_become(page: Any, count: int) -> None:
    try:
        expect(page.locator("#play-stats [data-stat=steps] b")).to_have_text(str(count))
    except AssertionError:
        explain(page)
        raise


def stat(page: Any, name: str) -> str:
    text: str = page.locator(f'#play-stats [data-stat="{name}"] b').inner_text()
    return text
