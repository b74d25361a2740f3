"""Typed action, observation and state of the wordle environment."""

from typing import Literal

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, Field

Color = Literal["green", "yellow", "gray"]


class WordleAction(Action):
    """Guess a five-letter word from the word list."""

    guess: str = Field(description="A five-letter English word from the bundled lists, e.g. 'crane'")


class GuessFeedback(BaseModel):
    """How one guess compares with the hidden word."""

    word: str = Field(description="The guessed word, lower case")
    colors: list[Color] = Field(
        description="Per letter: green = right place, yellow = elsewhere in the word, gray = not in it (no copy left)"
    )
    pattern: str = Field(description="The colors as text, one character per letter: G green, Y yellow, - gray")


class WordleObservation(Observation):
    """The guesses so far with their feedback."""

    board: str = Field(default="", description="Every guess so far with its pattern, one per line")
    guesses: list[GuessFeedback] = Field(default_factory=list, description="Every guess so far with its feedback")
    letters: dict[str, Color] = Field(
        default_factory=dict, description="The best color seen for each letter guessed so far"
    )
    guesses_left: int = Field(default=6, description="Guesses remaining")
    message: str = Field(default="", description="What happened, in words")
    error: str | None = Field(default=None, description="Why the guess was refused; it then costs no guess")
    answer: str | None = Field(default=None, description="The hidden word, revealed once the game is over")


class WordleState(State):
    """The game so far: step_count counts every step; the accepted guesses and the refused ones are apart."""

    guesses: list[str] = Field(default_factory=list, description="Accepted guesses, in order")
    max_guesses: int = Field(default=6, description="Guesses allowed")
    refused: int = Field(default=0, description="Guesses refused so far; they cost no turn")
    max_refused: int = Field(default=20, description="Refused guesses allowed before the episode ends unsolved")
    solved: bool = Field(default=False, description="Whether the word was found")
    done: bool = Field(default=False, description="Whether the episode has ended")
    answer: str | None = Field(default=None, description="The hidden word, revealed once the game is over")
