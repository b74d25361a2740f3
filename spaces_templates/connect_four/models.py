"""Typed action, observation and state of the connect-four environment."""

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class ConnectFourAction(Action):
    """Drop one of your pieces (X) into a column."""

    column: int = Field(description="Column to play, 0 (left) to 6 (right); see legal_actions")


class ConnectFourObservation(Observation):
    """The board after your move and the opponent's reply."""

    board: str = Field(default="", description="The board as text rows, top row first: X is you, O the opponent")
    grid: list[list[int]] = Field(
        default_factory=list, description="The board as 6 rows of 7 cells, top row first: 0 empty, 1 you, 2 opponent"
    )
    legal_actions: list[int] = Field(default_factory=list, description="Columns that still have room")
    last_opponent_move: int | None = Field(default=None, description="Column of the opponent's latest move, if any")
    winner: str | None = Field(default=None, description="'agent', 'opponent' or 'draw' once the game is over")
    message: str = Field(default="", description="What happened, in words")
    error: str | None = Field(default=None, description="Why the action was refused; the board is then unchanged")


class ConnectFourState(State):
    """The whole game; step_count counts every step of the episode, refused moves included."""

    depth: int = Field(default=4, description="Search depth of the opponent, 1 (weak) to 6 (strong)")
    agent_first: bool = Field(default=True, description="Whether the agent made the first move")
    grid: list[list[int]] = Field(default_factory=list, description="6 rows of 7 cells: 0 empty, 1 agent, 2 opponent")
    moves: list[int] = Field(default_factory=list, description="Columns played so far, both sides, in order")
    max_steps: int = Field(default=42, description="Steps allowed before the game is forfeited")
    winner: str | None = Field(default=None, description="'agent', 'opponent' or 'draw' once the game is over")
    done: bool = Field(default=False, description="Whether the episode has ended")
