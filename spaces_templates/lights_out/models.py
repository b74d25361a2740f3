"""Typed action, observation and state of the Lights Out environment."""

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class LightsOutAction(Action):
    """Press one light: it and its orthogonal neighbours flip."""

    row: int = Field(ge=0, description="Row of the light to press, counted from 0 at the top.")
    col: int = Field(ge=0, description="Column of the light to press, counted from 0 at the left.")


class LightsOutObservation(Observation):
    """The board after a reset or a press."""

    board: list[list[int]] = Field(default_factory=list, description="The lights, row by row: 1 on, 0 off.")
    board_text: str = Field(default="", description="The board as text, one line per row: 'O' on, '.' off.")
    size: int = Field(default=0, description="Lights per side of the square board.")
    lights_on: int = Field(default=0, description="How many lights are on; the goal is 0.")
    steps_left: int = Field(default=0, description="Presses left in the step budget.")
    message: str = Field(default="", description="What happened, in words.")
    error: str | None = Field(default=None, description="Why the last action had no effect, if it had none.")


class LightsOutState(State):
    """The episode as the server tracks it."""

    seed: int | None = Field(default=None, description="Seed the board was scrambled from; replay it with reset.")
    size: int = Field(default=0, description="Lights per side of the square board.")
    scramble_presses: int = Field(default=0, description="Random presses applied to a dark board to set the puzzle.")
    max_steps: int = Field(default=0, description="Step budget of the episode.")
    board: list[list[int]] = Field(default_factory=list, description="The lights, row by row: 1 on, 0 off.")
    lights_on: int = Field(default=0, description="How many lights are on.")
    solved: bool = Field(default=False, description="Whether every light is off.")
    done: bool = Field(default=False, description="Whether the episode is over.")
