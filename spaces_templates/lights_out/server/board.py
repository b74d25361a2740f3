"""Lights Out boards: pressing a light flips it and its orthogonal neighbours."""

import random

Board = list[list[int]]
ON_SYMBOL, OFF_SYMBOL = "O", "."


def dark_board(size: int) -> Board:
    return [[0] * size for _ in range(size)]


def press(board: Board, row: int, col: int) -> None:
    size = len(board)
    for r, c in ((row, col), (row - 1, col), (row + 1, col), (row, col - 1), (row, col + 1)):
        if 0 <= r < size and 0 <= c < size:
            board[r][c] ^= 1


def lights_on(board: Board) -> int:
    return sum(map(sum, board))


def scrambled(size: int, presses: int, rng: random.Random) -> Board:
    """A board reached from the dark one by distinct random presses, so pressing them again solves it."""
    cells = [(row, col) for row in range(size) for col in range(size)]
    while True:
        board = dark_board(size)
        for row, col in rng.sample(cells, presses):
            press(board, row, col)
        # Some sets of presses cancel out (on 4x4 and 5x5 boards, for instance); draw again.
        if lights_on(board):
            return board


def as_text(board: Board) -> str:
    return "\n".join("".join(ON_SYMBOL if light else OFF_SYMBOL for light in row) for row in board)
