"""Typed task, action, observation and state of the arithmetic tasks environment."""

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field


class ArithmeticTask(BaseModel):
    """One bundled task, as the Task API returns it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(description="Stable identifier, '<split>-<index>'.")
    split: str = Field(description="The split the task belongs to.")
    index: int = Field(description="Position of the task within its split.")
    kind: str = Field(description="The problem family, e.g. 'travel' or 'expression'.")
    steps: int = Field(description="Arithmetic operations needed to reach the answer.")
    question: str = Field(description="The problem, in words.")
    answer: int = Field(description="The exact integer answer.")


class ArithmeticAction(Action):
    """An answer to the current question."""

    answer: str = Field(
        max_length=100,
        description="The final answer as an integer in a string, e.g. '42' or '-7'; commas and spaces are ignored.",
    )
    reasoning: str | None = Field(default=None, max_length=20_000, description="Optional working; it is not graded.")


class ArithmeticObservation(Observation):
    """The current question and how the last answer was judged."""

    task_id: str = Field(default="", description="Identifier of the task being played.")
    split: str = Field(default="", description="Split of the task being played.")
    index: int = Field(default=0, description="Index of the task within its split.")
    question: str = Field(default="", description="The problem to solve.")
    attempts_left: int = Field(default=0, description="Answers still accepted in this episode.")
    correct: bool | None = Field(default=None, description="Whether the last answer was right; null before one.")
    expected_answer: int | None = Field(default=None, description="The right answer, revealed once the episode ends.")
    message: str = Field(default="", description="What happened, in words.")
    error: str | None = Field(default=None, description="Why the last action was not judged, if it was not.")


class ArithmeticState(State):
    """The episode as the server tracks it."""

    seed: int | None = Field(default=None, description="Seed that picked the task when no index was given.")
    split: str = Field(default="", description="Split of the task being played.")
    index: int = Field(default=0, description="Index of the task within its split.")
    task_id: str = Field(default="", description="Identifier of the task being played.")
    max_attempts: int = Field(default=0, description="Answers accepted per episode.")
    attempts_used: int = Field(default=0, description="Answers given so far.")
    solved: bool = Field(default=False, description="Whether a correct answer was given.")
    done: bool = Field(default=False, description="Whether the episode is over.")
