"""Playing from the forms in a real browser: every kind of action field takes input, and what comes back is shown
as its board where it is one. envhub launches the built-in templates for real with the process backend."""

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from app.settings import REPO_ROOT, Settings
from tests.conftest import needs
from tests.serving import Envhub
from tests.ui.browser import (
    choose,
    chromium_available,
    expect,
    field,
    fill_code,
    history_rows,
    launch_and_connect,
    open_page,
    reset,
    screenshot,
    steps_become,
)

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]


# The official environments (shared/ beside the checkout): read-only, so the test serves a copy.
CORPUS = REPO_ROOT.parent / "shared" / "thirdparty" / "openenv-envs"
CHESS_S = 300  # the official chess's first launch installs python-chess and moonfish into a virtualenv
ENDGAME = "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"  # few pieces: the environment's engine answers at once


@pytest.fixture(scope="module")
def envhub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    scratch = tmp_path_factory.mktemp("play-ui")
    if CORPUS.is_dir():
        shutil.copytree(CORPUS / "chess_env", scratch / "corpus" / "chess_env")
    settings = Settings(
        database_url=f"sqlite:///{scratch / 'envhub.db'}",
        data_dir=scratch / "data",
        templates_dir=REPO_ROOT / "spaces_templates",
        extra_templates=str(scratch / "corpus"),
        hf_endpoint="http://127.0.0.1:9",
        sync_interval_s=0,
        health_interval_s=0,
        launch_timeout_s=CHESS_S,
        max_endpoints_per_owner=10,
    )
    server = Envhub(settings, ui=True)
    yield server
    server.stop()


def test_the_maze_is_walked_with_its_direction_dropdown(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:maze")
    launch_and_connect(page)
    field(page, "play-seed").fill("1")  # seed 1: a wall above and to the right of the start, a corridor below
    reset(page)
    direction = page.locator("#field-direction input")
    expect(direction).to_be_enabled()
    choose(page, "field-direction", "down")
    page.locator("#play-step").click()
    steps_become(page, 1)
    expect(page.locator("#play-observation")).to_contain_text("You moved down.")
    choose(page, "field-direction", "right")
    page.locator("#play-step").click()
    steps_become(page, 2)
    expect(page.locator("#play-errors")).to_contain_text("There is a wall right of you")
    expect(history_rows(page).first).to_contain_text('"direction": "right"')
    board = page.locator("#play-observation .obs-beside")  # the grid drawn, next to the environment's own PNG
    expect(board.locator(".board-maze .cell.agent")).to_have_count(1)
    expect(board.locator(".board-maze .cell.exit")).to_have_count(1)
    expect(board.locator("img")).to_be_visible()
    screenshot(page, "play-maze")


def test_wordle_is_played_on_coloured_tiles(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:wordle")
    launch_and_connect(page)
    reset(page)
    tiles = page.locator("#play-observation .board-wordle")
    expect(tiles.locator(".tiles.empty")).to_have_count(6)
    field(page, "field-guess").fill("crane")
    page.locator("#play-step").click()
    steps_become(page, 1)
    row = tiles.locator('.tiles[data-word="crane"] .tile')
    expect(row).to_have_count(5)
    expect(row.first).to_have_text("C")
    assert all(row.nth(i).get_attribute("class").split()[1] in ("green", "yellow", "gray") for i in range(5))
    expect(tiles.locator(".tiles.empty")).to_have_count(5)


def test_connect_four_is_played_on_a_grid_of_discs(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:connect_four")
    launch_and_connect(page)
    field(page, "play-seed").fill("1")
    reset(page)
    discs = page.locator("#play-observation .board-discs")
    expect(discs.locator(".cell")).to_have_count(42)
    mine = discs.locator(".cell.one").count()
    field(page, "field-column").fill("3")
    page.locator("#play-step").click()
    steps_become(page, 1)
    expect(discs.locator(".cell.one")).to_have_count(mine + 1)
    expect(page.locator("#play-observation details.obs-as-text")).to_contain_text("board as text")  # the text, folded


@needs("the official environments", CORPUS.is_dir(), f"they are read from {CORPUS}")
@pytest.mark.timeout(CHESS_S + 120)
@pytest.mark.slow  # its engine thinks for seconds a move; boards drawn from a FEN: tests/ui/test_boards.py
def test_the_official_chess_is_played_on_a_board_drawn_from_its_fen(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:chess_env")
    page.locator("#open-play").click()
    page.locator("#play-launch").click()
    expect(page.locator("#play-status")).to_contain_text("Connected to", timeout=(CHESS_S + 30) * 1000)
    page.get_by_text("More reset options (JSON)").click()
    fill_code(page, "play-reset-options", f'{{"fen": "{ENDGAME}"}}')
    reset(page)
    board = page.locator("#play-observation .board-chess")
    expect(board.locator(".sq")).to_have_count(64)
    expect(board.locator(".sq[data-piece]")).to_have_count(3)  # two kings and a pawn (the engine may have moved)
    before = board.get_attribute("aria-label")
    move = page.locator("#play-legal button.legal").first.inner_text()  # a legal move, typed into the form
    field(page, "field-move").fill(move)
    page.locator("#play-step").click()
    steps_become(page, 1)
    expect(board).not_to_have_attribute("aria-label", before or "")
    expect(history_rows(page).first).to_contain_text(f'"move": "{move}"')
    screenshot(page, "play-chess")


def test_a_step_after_the_episode_ends_is_not_sent_and_points_to_reset(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:arithmetic_tasks")
    launch_and_connect(page)
    reset(page)
    for attempt in range(1, 4):  # three wrong answers end it
        field(page, "field-answer").fill("not a number")
        page.locator("#play-step").click()
        steps_become(page, attempt)
    page.locator("#play-step").click()
    expect(page.locator("#play-errors strong").last).to_have_text("Reset")  # the button to press
    steps_become(page, 3)
    expect(history_rows(page)).to_have_count(4)


def test_the_side_panel_names_the_runtime_of_the_running_endpoint(envhub: Envhub, page: Any) -> None:
    endpoint = envhub.running("template:connect_four")
    open_page(page, envhub.url + "/?env=template:connect_four")
    runtime = page.locator("#env-status tr").filter(has=page.locator("th", has_text="Runtime")).locator("td")
    expect(runtime).to_have_text(f"process endpoint {endpoint['id']}")


def test_a_templates_api_and_tasks_show_before_any_launch(envhub: Envhub, page: Any) -> None:
    def launched() -> list[str]:
        endpoints = envhub.http.get("/api/endpoints").json()["data"]
        return [e["id"] for e in endpoints if e["environment"] == "template:arithmetic_tasks"]

    before = launched()
    open_page(page, envhub.url + "/?env=template:arithmetic_tasks")
    page.get_by_role("tab", name="API").click()
    expect(page.locator("#env-api")).to_contain_text("Task API")
    expect(page.locator("#env-api table").first).to_contain_text("answer")
    page.get_by_role("tab", name="Tasks").click()
    expect(page.locator("#env-tasks")).to_contain_text("Task API splits")
    expect(page.locator("#env-tasks")).to_contain_text("test-0000")
    assert launched() == before  # read from the source: nothing was launched


def test_play_connects_to_a_url_typed_in_and_says_why_it_cannot(envhub: Envhub, page: Any) -> None:
    endpoint = envhub.running("template:lights_out")
    open_page(page, envhub.url + "/")
    page.get_by_role("tab", name="Play").click()
    url_box = page.locator("#play-url input")
    url_box.fill(envhub.url + "/endpoints/0000000000")  # nothing serves there
    url_box.press("Enter")
    page.locator("#play-connect").click()
    expect(page.locator("#play-status")).to_contain_text(f"Could not connect to {envhub.url}/endpoints/0000000000")
    url_box.fill(endpoint["url"])
    url_box.press("Enter")
    page.locator("#play-connect").click()
    expect(page.locator("#play-status")).to_contain_text(f"Connected to {endpoint['url']}")
    expect(page.locator("#play-title")).to_contain_text(f"Playing the server at {endpoint['url']}")
    reset(page)
    expect(history_rows(page)).to_have_count(1)
