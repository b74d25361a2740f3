"""Counts in words, as the page says them: '1 replica', '2 replicas'."""


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """The count and its noun, singular for one; `nouns` when the plural is not noun + 's'."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"
