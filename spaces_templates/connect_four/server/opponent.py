"""The built-in opponent: negamax search with alpha-beta pruning to a fixed depth."""

import random

from server.board import COLUMNS, ROWS, WINDOWS, Board, other

WIN = 1_000_000
INFINITY = 10 * WIN
CENTER = COLUMNS // 2
# Searching central columns first finds good moves early, so alpha-beta prunes more.
ORDER = sorted(range(COLUMNS), key=lambda column: abs(column - CENTER))
LINE_VALUES = {2: 2, 3: 5}


def choose_move(board: Board, piece: int, depth: int, rng: random.Random) -> int:
    """The best column for piece looking depth plies ahead; rng breaks ties between equally good columns."""
    best_score, best_columns = -INFINITY, []
    for column in _ordered(board):
        row = board.drop(column, piece)
        if board.wins_at(row, column):
            score = WIN + depth
        else:
            # A window just above best_score - 1 keeps every score that could tie or beat the best exact.
            score = -_negamax(board, other(piece), depth - 1, -INFINITY, -(best_score - 1))
        board.undo(column)
        if score > best_score:
            best_score, best_columns = score, [column]
        elif score == best_score:
            best_columns.append(column)
    return rng.choice(best_columns)


def _negamax(board: Board, piece: int, depth: int, alpha: int, beta: int) -> int:
    """The value of the position for piece, the side to move; wins found sooner score higher."""
    columns = _ordered(board)
    if not columns:
        return 0
    if depth == 0:
        return evaluate(board, piece)
    best = -INFINITY
    for column in columns:
        row = board.drop(column, piece)
        score = WIN + depth if board.wins_at(row, column) else -_negamax(board, other(piece), depth - 1, -beta, -alpha)
        board.undo(column)
        best = max(best, score)
        alpha = max(alpha, score)
        if alpha >= beta:
            break
    return best


def _ordered(board: Board) -> list[int]:
    return [column for column in ORDER if board.heights[column] < ROWS]


def evaluate(board: Board, piece: int) -> int:
    """A heuristic for piece: open lines of two and three, and pieces in the center column."""
    opponent = other(piece)
    grid = board.grid
    score = 0
    for window in WINDOWS:
        cells = [grid[row][column] for row, column in window]
        mine, theirs = cells.count(piece), cells.count(opponent)
        if theirs == 0 and mine in LINE_VALUES:
            score += LINE_VALUES[mine]
        elif mine == 0 and theirs in LINE_VALUES:
            score -= LINE_VALUES[theirs]
    center = [row[CENTER] for row in grid]
    return score + 3 * (center.count(piece) - center.count(opponent))
