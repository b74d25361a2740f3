"""Seeded perfect mazes on a character grid, and moving through them."""

import random
from dataclasses import dataclass

WALL, FLOOR, AGENT, EXIT = "#", ".", "A", "E"
MOVES: dict[str, tuple[int, int]] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}

Square = tuple[int, int]


@dataclass(frozen=True)
class Maze:
    """A maze as the set of open squares of a (2*size+1)-square character grid."""

    size: int
    open_squares: frozenset[Square]

    @property
    def side(self) -> int:
        return 2 * self.size + 1

    @property
    def start(self) -> Square:
        return (1, 1)

    @property
    def exit(self) -> Square:
        return (self.side - 2, self.side - 2)

    def is_open(self, square: Square) -> bool:
        return square in self.open_squares

    def rows(self, agent: Square) -> list[str]:
        """The grid as lines of text, with the agent drawn over whatever it stands on."""
        return ["".join(self._symbol((row, col), agent) for col in range(self.side)) for row in range(self.side)]

    def _symbol(self, square: Square, agent: Square) -> str:
        if square == agent:
            return AGENT
        if square == self.exit:
            return EXIT
        return FLOOR if self.is_open(square) else WALL


def step_from(square: Square, direction: str) -> Square:
    d_row, d_col = MOVES[direction]
    return (square[0] + d_row, square[1] + d_col)


def generate(size: int, rng: random.Random) -> Maze:
    """Carve a maze of size x size cells with a randomised depth-first search, so every cell is reachable."""
    visited = {(0, 0)}
    stack = [(0, 0)]
    open_squares = {_grid_square((0, 0))}
    while stack:
        cell = stack[-1]
        choices = [
            neighbour
            for neighbour in (step_from(cell, direction) for direction in MOVES)
            if 0 <= neighbour[0] < size and 0 <= neighbour[1] < size and neighbour not in visited
        ]
        if not choices:
            stack.pop()
            continue
        chosen = rng.choice(choices)
        visited.add(chosen)
        stack.append(chosen)
        # Cell (r, c) sits at grid square (2r+1, 2c+1); the wall between two cells is their midpoint.
        open_squares.add((cell[0] + chosen[0] + 1, cell[1] + chosen[1] + 1))
        open_squares.add(_grid_square(chosen))
    return Maze(size=size, open_squares=frozenset(open_squares))


def _grid_square(cell: Square) -> Square:
    return (2 * cell[0] + 1, 2 * cell[1] + 1)
