"""Boards found in observations: chess from a FEN, wordle tiles, connect-four discs, lights, mazes (text or a list of
lists, the official maze's in its metadata), any other grid as coloured cells; and what is not a board."""

import re

from app.ui.boards import find_board

START = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1"


def cells(html: str) -> list[str]:
    return re.findall(r'<span class="cell (\w+)"', html)


def test_a_fen_is_drawn_as_a_chess_board() -> None:
    board = find_board({"fen": START, "legal_moves": ["e7e5"], "is_check": False})
    assert board is not None and board.field == "fen"
    squares = re.findall(r'<span class="sq (light|dark)"(?: data-piece="(\w)")?>', board.html)
    assert len(squares) == 64 and squares[0] == ("light", "r") and squares[-1] == ("light", "R")  # a8 light, h1 light
    assert squares[36] == ("light", "P")  # e4
    assert "♚" in board.html and "♔" in board.html and "Black to move" in board.html
    assert find_board({"fen": "not/a/fen"}) is None


def test_wordle_guesses_are_coloured_tiles_with_the_rows_left() -> None:
    observation = {
        "guesses": [{"word": "crane", "colors": ["gray", "green", "yellow", "gray", "gray"], "pattern": "-GY--"}],
        "letters": {"c": "gray", "r": "green", "a": "yellow"},
        "guesses_left": 5,
    }
    board = find_board(observation)
    assert board is not None and board.field == "guesses"
    tiles = re.findall(r'<span class="tile (\w+)">(\w)</span>', board.html)
    assert tiles == [("gray", "C"), ("green", "R"), ("yellow", "A"), ("gray", "N"), ("gray", "E")]
    assert board.html.count('<div class="tiles empty">') == 5
    assert '<span class="key green">R</span>' in board.html
    patterned = find_board({"guesses": [{"word": "slate", "pattern": "GY---"}]})
    assert patterned is not None and '<span class="tile green">S</span>' in patterned.html
    begun = find_board({"guesses": [], "guesses_left": 6})  # before the first guess: six empty rows
    assert begun is not None and begun.html.count('<div class="tiles empty">') == 6


def test_connect_four_is_discs_and_lights_out_is_lights() -> None:
    grid = [[0] * 7 for _ in range(6)]
    grid[5][3], grid[5][4] = 1, 2
    discs = find_board({"board": ". . .\n. . .", "grid": grid})
    assert discs is not None and discs.field == "grid" and "board-discs" in discs.html
    assert cells(discs.html).count("one") == 1 and cells(discs.html).count("two") == 1
    official = find_board({"board": [[0] * 7 for _ in range(5)] + [[0, 0, 0, 1, -1, 0, 0]]})  # 1 and -1
    assert official is not None and cells(official.html).count("two") == 1
    lights = find_board({"board": [[1, 0, 0], [0, 1, 0], [0, 0, 0]], "board_text": "O..\n.O.\n..."})
    assert lights is not None and "board-lights" in lights.html and cells(lights.html).count("lit") == 2


def test_mazes_as_text_and_as_the_official_maze_keeps_them_in_its_metadata() -> None:
    text = find_board({"grid": "#####\n#A..#\n###E#"})
    assert text is not None and cells(text.html) == ["wall"] * 6 + ["agent", "floor", "floor", "wall"] + [
        "wall", "wall", "wall", "exit", "wall"
    ]  # fmt: skip
    maze = [[0, 1, 0], [0, 1, 0], [0, 0, 0]]
    official = find_board({"current_position": [2, 0], "metadata": {"maze": maze, "exit_cell": [2, 2]}})
    assert official is not None and official.field == "maze"
    drawn = cells(official.html)
    assert drawn[6] == "agent" and drawn[8] == "exit" and drawn.count("wall") == 2  # [2, 0] is row 2: open there


def test_other_grids_are_cells_and_what_is_not_a_board_is_left_alone() -> None:
    snake = find_board({"grid": [[0, 3, 3], [0, 0, 7], [5, 0, 0]]})
    assert snake is not None and "board-cells" in snake.html and len(set(cells(snake.html))) == 4
    assert find_board({"scores": [[1, 2], [3, 4]]}) is None  # a table of numbers, not named like a board
    assert find_board({"grid": [[0] * 100] * 3}) is None  # too wide to draw
    assert find_board({"message": "line one\nline two\nline three"}) is None
    hostile = find_board({"guesses": [{"word": "<img>", "pattern": "GGGGG"}]})
    assert hostile is not None and "<img>" not in hostile.html.replace('data-word="&lt;img&gt;"', "")
