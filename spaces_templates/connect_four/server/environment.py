"""Connect four against a minimax opponent whose search depth is chosen at reset."""

import random
from pathlib import Path
from typing import Any
from uuid import uuid4

from models import ConnectFourAction, ConnectFourObservation, ConnectFourState
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from server.board import AGENT, COLUMNS, OPPONENT, Board
from server.opponent import choose_move

DEFAULT_DEPTH = 4
MAX_DEPTH = 6
# The agent never needs more than 21 moves; the rest of the budget absorbs refused moves.
MAX_STEPS = 42
REWARDS = {"agent": 1.0, "opponent": -1.0, "draw": 0.0}
README = Path(__file__).resolve().parents[1] / "README.md"


class ConnectFourEnvironment(Environment[ConnectFourAction, ConnectFourObservation, ConnectFourState]):
    """The agent plays X; the opponent plays O and answers every move at once."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    _board: Board
    _rng: random.Random
    _state: ConnectFourState
    _last_opponent_move: int | None

    def __init__(self) -> None:
        super().__init__()
        # openenv's HTTP /step builds a fresh instance and steps it without a reset, so start a game here
        # (with the agent to move, which needs no search).
        self.reset(agent_first=True)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        depth: int = DEFAULT_DEPTH,
        agent_first: bool | None = None,
        **options: Any,
    ) -> ConnectFourObservation:
        _check_options(depth, agent_first, options)
        self._rng = random.Random(seed)
        first = self._rng.random() < 0.5 if agent_first is None else agent_first
        self._board = Board()
        self._last_opponent_move = None
        self._state = ConnectFourState(
            episode_id=episode_id or str(uuid4()), depth=depth, agent_first=first, max_steps=MAX_STEPS
        )
        if first:
            return self._observe(f"You are X against a depth-{depth} opponent (O). You move first.", reward=0.0)
        self._opponent_moves()
        return self._observe(
            f"You are X against a depth-{depth} opponent (O). It opened in column {self._last_opponent_move}.",
            reward=0.0,
        )

    @property
    def state(self) -> ConnectFourState:
        self._state.grid = self._board.copy_grid()
        return self._state

    def step(self, action: ConnectFourAction, timeout_s: float | None = None, **kwargs: Any) -> ConnectFourObservation:
        if self._state.done:
            return self._observe("The game is over.", reward=0.0, error="The game is over; reset to play again.")
        self._state.step_count += 1
        refusal = self._refusal(action.column)
        if refusal is not None:
            return self._refuse(refusal)
        if self._play(action.column, AGENT):
            return self._end("agent", f"You played column {action.column} and won!")
        if self._board.is_full():
            return self._end("draw", "The board is full: a draw.")
        if self._opponent_moves():
            return self._end("opponent", f"The opponent played column {self._last_opponent_move} and won.")
        if self._board.is_full():
            return self._end("draw", "The board is full: a draw.")
        return self._observe(f"You played {action.column}; the opponent answered {self._last_opponent_move}.")

    def _refusal(self, column: int) -> str | None:
        legal = self._board.legal_columns()
        if not 0 <= column < COLUMNS:
            return f"Column {column} does not exist; columns are 0 to {COLUMNS - 1}. Legal now: {legal}."
        if column not in legal:
            return f"Column {column} is full. Legal now: {legal}."
        return None

    def _refuse(self, error: str) -> ConnectFourObservation:
        """A refused move changes nothing but still spends a step, so stalling cannot postpone a loss forever."""
        if self._state.step_count >= self._state.max_steps:
            return self._end("opponent", f"Step budget of {self._state.max_steps} spent: the game is forfeited.", error)
        return self._observe("Move refused; the board is unchanged.", error=error)

    def _play(self, column: int, piece: int) -> bool:
        """Drop a piece; returns whether it won."""
        row = self._board.drop(column, piece)
        self._state.moves.append(column)
        return self._board.wins_at(row, column)

    def _opponent_moves(self) -> bool:
        """Let the opponent reply; returns whether it won."""
        self._last_opponent_move = choose_move(self._board, OPPONENT, self._state.depth, self._rng)
        return self._play(self._last_opponent_move, OPPONENT)

    def _end(self, winner: str, message: str, error: str | None = None) -> ConnectFourObservation:
        self._state.winner = winner
        self._state.done = True
        return self._observe(message, reward=REWARDS[winner], error=error)

    def _observe(self, message: str, reward: float = 0.0, error: str | None = None) -> ConnectFourObservation:
        done = self._state.done
        return ConnectFourObservation(
            board=self._board.render(),
            grid=self._board.copy_grid(),
            legal_actions=[] if done else self._board.legal_columns(),
            last_opponent_move=self._last_opponent_move,
            winner=self._state.winner,
            message=message,
            error=error,
            done=done,
            reward=reward,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="connect_four",
            description="Connect four against an alpha-beta minimax opponent of selectable depth.",
            version="1.0.0",
            readme_content=README.read_text(encoding="utf-8") if README.exists() else None,
        )


def _check_options(depth: Any, agent_first: Any, unknown: dict[str, Any]) -> None:
    """Reset options arrive as raw JSON over the WebSocket, unvalidated by openenv."""
    if unknown:
        raise ValueError(f"unknown reset option(s): {', '.join(sorted(unknown))}")
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be a whole number from 1 to {MAX_DEPTH}, got {depth!r}")
    if agent_first is not None and not isinstance(agent_first, bool):
        raise ValueError(f"agent_first must be true, false or null, got {agent_first!r}")
