"""Typed action, observation and state of the maze environment."""

from typing import Literal

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

Direction = Literal["up", "down", "left", "right"]


class MazeAction(Action):
    """One move of the agent on the text grid."""

    direction: Direction = Field(description="Where to move one square: 'up', 'down', 'left' or 'right'.")


class MazeObservation(Observation):
    """The maze after a reset or a move, as text and as a PNG image."""

    grid: str = Field(
        default="",
        description="The maze as text, one line per row: '#' wall, '.' floor, 'A' agent, 'E' exit.",
    )
    position: list[int] = Field(default_factory=list, description="The agent's [row, column] on the text grid.")
    exit: list[int] = Field(default_factory=list, description="The exit's [row, column] on the text grid.")
    image_png_base64: str = Field(default="", description="The same grid drawn as a PNG, base64-encoded.")
    image_mime: Literal["image/png"] = Field(default="image/png", description="Media type of the image.")
    image_width: int = Field(default=0, description="Width of the PNG in pixels.")
    image_height: int = Field(default=0, description="Height of the PNG in pixels.")
    steps_left: int = Field(default=0, description="Moves left in the step budget.")
    message: str = Field(default="", description="What happened, in words.")
    error: str | None = Field(default=None, description="Why the last action had no effect, if it had none.")


class MazeState(State):
    """The episode as the server tracks it."""

    seed: int | None = Field(default=None, description="Seed the maze was generated from; replay it with reset.")
    size: int = Field(default=0, description="Cells per side of the maze (the text grid is 2*size+1 wide).")
    max_steps: int = Field(default=0, description="Step budget of the episode.")
    position: list[int] = Field(default_factory=list, description="The agent's [row, column] on the text grid.")
    exit: list[int] = Field(default_factory=list, description="The exit's [row, column] on the text grid.")
    solved: bool = Field(default=False, description="Whether the agent has reached the exit.")
    done: bool = Field(default=False, description="Whether the episode is over.")
