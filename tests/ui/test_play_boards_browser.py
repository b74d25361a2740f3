"""The built-in boards played to their end in a real browser with clicks and keys alone, never the form's Step:
the maze with its arrow buttons and the arrow keys, Lights Out by clicking cells, Connect Four by clicking columns,
Wordle by typing and Enter. envhub launches the templates for real with the process backend."""

import itertools
from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest

from app.settings import REPO_ROOT
from tests.conftest import needs
from tests.serving import Envhub
from tests.ui.browser import (
    chromium_available,
    expect,
    field,
    launch_and_connect,
    offline_settings,
    open_page,
    reset,
    stat,
    steps_become,
)

pytestmark = [
    pytest.mark.browser,
    needs("Chromium", chromium_available(), "install it with 'apt-get install chromium' (and pip install playwright)"),
]

WORDS = (REPO_ROOT / "spaces_templates" / "wordle" / "server" / "words.txt").read_text().split()
MOVES = {(-1, 0): "ArrowUp", (1, 0): "ArrowDown", (0, -1): "ArrowLeft", (0, 1): "ArrowRight"}


@pytest.fixture(scope="module")
def envhub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    scratch = tmp_path_factory.mktemp("boards-ui")
    server = Envhub(offline_settings(scratch, max_endpoints_per_owner=10), ui=True)
    yield server
    server.stop()


def cells(page: Any, board: str) -> list[list[str]]:
    """The drawn grid's cells, each by its kind (its second class: wall, floor, lit, one ...)."""
    grid = page.locator(f"#play-observation .{board}")
    width = int(grid.get_attribute("data-columns"))
    kinds = grid.locator(".cell").evaluate_all("(cells) => cells.map((cell) => cell.classList[1])")
    return [kinds[i : i + width] for i in range(0, len(kinds), width)]


def shortest_path(grid: list[list[str]]) -> list[str]:
    """The arrow keys from the agent to the exit."""
    start = next((r, c) for r, row in enumerate(grid) for c, kind in enumerate(row) if kind == "agent")
    came: dict[tuple[int, int], tuple[tuple[int, int], str]] = {}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        if grid[here[0]][here[1]] == "exit":
            keys = []
            while here != start:
                here, key = came[here]
                keys.append(key)
            return keys[::-1]
        for (dr, dc), key in MOVES.items():
            there = (here[0] + dr, here[1] + dc)
            inside = 0 <= there[0] < len(grid) and 0 <= there[1] < len(grid[0])
            if inside and grid[there[0]][there[1]] != "wall" and there not in came and there != start:
                came[there] = (here, key)
                queue.append(there)
    raise AssertionError("the drawn maze has no way out")


def presses_to_solve(lit: list[list[bool]]) -> list[tuple[int, int]]:
    """The cells whose presses put every light out: the press-vector solving A x = lit over GF(2)."""
    size = len(lit)
    n = size * size
    rows = []
    for r, c in itertools.product(range(size), repeat=2):
        mask = 0
        for dr, dc in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
            if 0 <= r + dr < size and 0 <= c + dc < size:
                mask |= 1 << ((r + dr) * size + c + dc)
        rows.append(mask | (int(lit[r][c]) << n))  # row r*size+c: which presses flip this light, and whether it is on
    pivots: list[int] = []
    for column in range(n):
        found = next((i for i in range(len(pivots), n) if rows[i] >> column & 1), None)
        if found is None:
            continue
        top = len(pivots)
        rows[top], rows[found] = rows[found], rows[top]
        rows = [row ^ rows[top] if i != top and row >> column & 1 else row for i, row in enumerate(rows)]
        pivots.append(column)
    assert all(not rows[i] >> n & 1 for i in range(len(pivots), n)), "the board cannot be put out"
    return [divmod(column, size) for i, column in enumerate(pivots) if rows[i] >> n & 1]


def test_lights_out_is_solved_by_clicking_cells_and_pressing_them_from_the_keyboard(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:lights_out")
    launch_and_connect(page)
    expect(page.locator("#play-controls")).to_contain_text("Click a cell")
    field(page, "play-seed").fill("3")
    reset(page)
    board = cells(page, "board-lights")
    presses = presses_to_solve([[kind == "lit" for kind in row] for row in board])
    assert presses
    for step, (row, col) in enumerate(presses, start=1):
        cell = page.locator(f'#play-observation .board-lights button[aria-label^="row {row}, column {col}:"]')
        if step == 1:  # from the keyboard: the focus stays on the cell pressed, visibly
            cell.focus()
            page.keyboard.press("Enter")
        else:
            cell.click()
        steps_become(page, step)
        if step == 1:
            expect(cell).to_be_focused()
            assert cell.evaluate("(cell) => getComputedStyle(cell).outlineStyle") == "solid"
    expect(page.locator("#play-stats [data-stat=done] b")).to_have_text("yes")
    expect(page.locator("#play-observation .board-lights .lit")).to_have_count(0)
    expect(page.locator("#play-step")).to_be_visible()  # the form stays, for what has no direct control


@pytest.mark.slow  # the same click-to-step path as Lights Out, longer: one step per square walked
def test_the_maze_is_walked_to_its_exit_with_the_arrow_buttons_and_keys(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:maze")
    launch_and_connect(page)
    arrows = page.locator("#play-controls button.direct")
    expect(arrows).to_have_count(4)
    field(page, "play-seed").fill("1")
    reset(page)
    keys = shortest_path(cells(page, "board-maze"))
    for step, key in enumerate(keys, start=1):
        if step == 1:
            page.locator(f'#play-controls button[data-key="{key}"]').click()
        else:
            page.keyboard.press(key)
        steps_become(page, step)
    expect(page.locator("#play-stats [data-stat=done] b")).to_have_text("yes")
    assert float(stat(page, "cumulative-reward")) > 0


@pytest.mark.slow  # its opponent searches each reply; the click on a board's cell: the Lights Out test
def test_connect_four_is_played_to_its_end_by_clicking_columns(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:connect_four")
    launch_and_connect(page)
    field(page, "play-seed").fill("1")
    reset(page)
    legend = page.locator("#play-observation [data-legend]")
    expect(legend).to_contain_text("you")
    expect(legend.locator(".one")).to_be_visible()  # your colour, beside the word
    step = 0
    while stat(page, "done") != "yes":
        top = cells(page, "board-discs")[0]
        column = next(c for c, kind in enumerate(top) if kind == "empty")
        step += 1
        if step % 2:
            page.locator("#play-observation .board-discs span.playable").nth(column).click()  # the column's top cell
        else:
            page.locator(f'#play-observation .board-discs button[aria-label="column {column}"]').click()
        steps_become(page, step)
        assert page.locator("#play-errors").inner_text().strip() == ""
    expect(page.locator("#play-observation")).to_contain_text("winner")


@pytest.mark.slow  # six guesses typed into the guess box, each sent by Enter
def test_wordle_is_played_by_typing_each_guess_and_pressing_enter(envhub: Envhub, page: Any) -> None:
    open_page(page, envhub.url + "/?env=template:wordle")
    launch_and_connect(page)
    reset(page)
    guess = field(page, "field-guess")
    for step, word in enumerate(WORDS[::97], start=1):
        expect(guess).to_have_value("")  # the last guess was taken: the box is ready for the next
        guess.press_sequentially(word)
        guess.press("Enter")
        steps_become(page, step)
        if stat(page, "done") == "yes":
            break
    expect(page.locator("#play-stats [data-stat=done] b")).to_have_text("yes")
    expect(page.locator("#play-observation .board-wordle .tiles[data-word]")).not_to_have_count(0)
