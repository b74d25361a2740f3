"""A wordle-like game: find the hidden five-letter word in six guesses."""

import random
from pathlib import Path
from typing import Any
from uuid import uuid4

from models import Color, GuessFeedback, WordleAction, WordleObservation, WordleState
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from server.words import WORD_SET, WORDS, problem_with, score

MAX_GUESSES = 6
# Refused guesses cost no turn; past this many the episode ends unsolved, so an agent cannot loop forever.
MAX_REFUSED = 20
SYMBOLS = {"green": "G", "yellow": "Y", "gray": "-"}
RANK = {"gray": 0, "yellow": 1, "green": 2}
README = Path(__file__).resolve().parents[1] / "README.md"


class WordleEnvironment(Environment[WordleAction, WordleObservation, WordleState]):
    """One hidden word per episode, picked from the bundled list by the seed."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    _answer: str
    _feedback: list[GuessFeedback]
    _state: WordleState

    def __init__(self) -> None:
        super().__init__()
        # openenv's HTTP /step builds a fresh instance and steps it without a reset, so start a game here.
        self.reset()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, answer: str | None = None, **options: Any
    ) -> WordleObservation:
        if options:
            raise ValueError(f"unknown reset option(s): {', '.join(sorted(options))}")
        if answer is not None and (not isinstance(answer, str) or answer.strip().lower() not in WORD_SET):
            raise ValueError(f"answer {answer!r} is not in the word list")
        self._answer = answer.strip().lower() if answer is not None else random.Random(seed).choice(WORDS)
        self._feedback = []
        self._state = WordleState(
            episode_id=episode_id or str(uuid4()), max_guesses=MAX_GUESSES, max_refused=MAX_REFUSED
        )
        return self._observe(
            f"Guess the hidden five-letter word in {MAX_GUESSES} tries. Feedback per letter: "
            "G = right place, Y = in the word elsewhere, - = not in the word (or no more copies).",
            reward=0.0,
        )

    @property
    def state(self) -> WordleState:
        return self._state

    def step(self, action: WordleAction, timeout_s: float | None = None, **kwargs: Any) -> WordleObservation:
        if self._state.done:
            return self._observe("The game is over.", error="The game is over; reset to play again.")
        self._state.step_count += 1  # every step, as openenv's state counts them; turns are the guesses taken
        guess = action.guess.strip().lower()
        problem = problem_with(guess)
        if problem is not None:
            return self._refuse(problem)
        self._record(guess)
        if guess == self._answer:
            return self._end(True, f"Solved in {len(self._feedback)} guesses: {self._answer!r}.")
        if len(self._feedback) >= MAX_GUESSES:
            return self._end(False, f"Out of guesses; the word was {self._answer!r}.")
        left = MAX_GUESSES - len(self._feedback)
        return self._observe(f"{guess!r}: {self._feedback[-1].pattern}. {left} guesses left.")

    def _refuse(self, problem: str) -> WordleObservation:
        """A refused guess costs no turn, but only so many are allowed, so an agent cannot loop forever."""
        self._state.refused += 1
        if self._state.refused >= self._state.max_refused:
            return self._end(False, f"{MAX_REFUSED} guesses refused; the word was {self._answer!r}.", problem)
        return self._observe("Guess refused; no guess was used.", error=problem)

    def _record(self, guess: str) -> None:
        colors = score(guess, self._answer)
        pattern = "".join(SYMBOLS[color] for color in colors)
        self._feedback.append(GuessFeedback(word=guess, colors=colors, pattern=pattern))
        self._state.guesses.append(guess)

    def _end(self, solved: bool, message: str, error: str | None = None) -> WordleObservation:
        self._state.solved = solved
        self._state.done = True
        self._state.answer = self._answer
        return self._observe(message, reward=1.0 if solved else 0.0, error=error)

    def _observe(self, message: str, reward: float = 0.0, error: str | None = None) -> WordleObservation:
        return WordleObservation(
            board="\n".join(f"{item.word.upper()} {item.pattern}" for item in self._feedback),
            guesses=list(self._feedback),
            letters=self._letters(),
            guesses_left=MAX_GUESSES - len(self._feedback),
            message=message,
            error=error,
            answer=self._state.answer,
            done=self._state.done,
            reward=reward,
        )

    def _letters(self) -> dict[str, Color]:
        best: dict[str, Color] = {}
        for item in self._feedback:
            for letter, color in zip(item.word, item.colors, strict=True):
                if letter not in best or RANK[color] > RANK[best[letter]]:
                    best[letter] = color
        return dict(sorted(best.items()))

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="wordle",
            description="Find the hidden five-letter word in six guesses, with green/yellow/gray feedback.",
            version="1.0.0",
            readme_content=README.read_text(encoding="utf-8") if README.exists() else None,
        )
