"""The bundled word lists and the wordle scoring rule."""

from collections import Counter
from pathlib import Path

WORD_LENGTH = 5
HERE = Path(__file__).parent
# The hidden word is drawn from the common words; a guess may be any five-letter word of the larger list.
WORDS: tuple[str, ...] = tuple((HERE / "words.txt").read_text(encoding="utf-8").split())
WORD_SET = frozenset(WORDS)
GUESSES = WORD_SET | frozenset((HERE / "guesses.txt").read_text(encoding="utf-8").split())


def score(guess: str, answer: str) -> list[str]:
    """Color each letter of guess: greens first, then yellows only while unmatched copies of the letter remain."""
    colors = ["gray"] * len(guess)
    unmatched: Counter[str] = Counter()
    for index, (letter, target) in enumerate(zip(guess, answer, strict=True)):
        if letter == target:
            colors[index] = "green"
        else:
            unmatched[target] += 1
    for index, letter in enumerate(guess):
        if colors[index] == "gray" and unmatched[letter] > 0:
            colors[index] = "yellow"
            unmatched[letter] -= 1
    return colors


def problem_with(guess: str) -> str | None:
    """Why a (normalized) guess cannot be played, or None."""
    if not guess.isascii() or not guess.isalpha():
        return f"{guess!r} must contain only the letters a to z"
    if len(guess) != WORD_LENGTH:
        return f"{guess!r} has {len(guess)} letters; guesses have exactly {WORD_LENGTH}"
    if guess not in GUESSES:
        return f"{guess!r} is not in the word list"
    return None
