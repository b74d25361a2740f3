"""The connect-four board: six rows of seven columns, pieces dropped from the top."""

ROWS, COLUMNS = 6, 7
EMPTY, AGENT, OPPONENT = 0, 1, 2
SYMBOLS = {EMPTY: ".", AGENT: "X", OPPONENT: "O"}
DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))


def _windows() -> tuple[tuple[tuple[int, int], ...], ...]:
    """Every line of four cells on the board (69 of them)."""
    found = []
    for row in range(ROWS):
        for column in range(COLUMNS):
            for d_row, d_column in DIRECTIONS:
                cells = tuple((row + i * d_row, column + i * d_column) for i in range(4))
                if all(0 <= r < ROWS and 0 <= c < COLUMNS for r, c in cells):
                    found.append(cells)
    return tuple(found)


WINDOWS = _windows()


def other(piece: int) -> int:
    return AGENT if piece == OPPONENT else OPPONENT


class Board:
    """A grid with row 0 at the top, plus the height of each column for fast drops and undos."""

    def __init__(self) -> None:
        self.grid = [[EMPTY] * COLUMNS for _ in range(ROWS)]
        self.heights = [0] * COLUMNS

    def legal_columns(self) -> list[int]:
        return [column for column in range(COLUMNS) if self.heights[column] < ROWS]

    def is_full(self) -> bool:
        return all(height == ROWS for height in self.heights)

    def drop(self, column: int, piece: int) -> int:
        """Place a piece in a column that has room; returns the row it lands on."""
        self.heights[column] += 1
        row = ROWS - self.heights[column]
        self.grid[row][column] = piece
        return row

    def undo(self, column: int) -> None:
        row = ROWS - self.heights[column]
        self.grid[row][column] = EMPTY
        self.heights[column] -= 1

    def wins_at(self, row: int, column: int) -> bool:
        """Whether the piece at (row, column) completes four in a line."""
        piece = self.grid[row][column]
        for d_row, d_column in DIRECTIONS:
            count = (
                1 + self._run(row, column, d_row, d_column, piece) + self._run(row, column, -d_row, -d_column, piece)
            )
            if count >= 4:
                return True
        return False

    def _run(self, row: int, column: int, d_row: int, d_column: int, piece: int) -> int:
        length = 0
        row, column = row + d_row, column + d_column
        while 0 <= row < ROWS and 0 <= column < COLUMNS and self.grid[row][column] == piece:
            length += 1
            row, column = row + d_row, column + d_column
        return length

    def render(self) -> str:
        """Text rows, top first, with the column numbers underneath."""
        rows = [" ".join(SYMBOLS[cell] for cell in row) for row in self.grid]
        return "\n".join([*rows, " ".join(str(column) for column in range(COLUMNS))])

    def copy_grid(self) -> list[list[int]]:
        return [list(row) for row in self.grid]
