"""The baselines: what the environment says is legal (listed actions, enums, examples) comes first, then any value
of the schema's types; a refused move is asked again."""

import asyncio

from rollout.harness import Brief
from rollout.players import FirstLegal, RandomPolicy

GUESS = {
    "type": "object",
    "properties": {"guess": {"type": "string", "examples": ["crane", "slate", "pious"]}},
    "required": ["guess"],
}
COLUMN = {"type": "object", "properties": {"column": {"type": "integer", "minimum": 0, "maximum": 6}}}


def test_random_draws_strings_from_the_schemas_examples() -> None:
    player = RandomPolicy.player(Brief("wordle", action_schema=GUESS), seed=3)
    guesses = {asyncio.run(player.act({"board": ""}, None)).action["guess"] for _ in range(30)}  # type: ignore[index]
    assert guesses == {"crane", "slate", "pious"}


def test_random_picks_among_the_listed_legal_actions_and_retries_with_another_move() -> None:
    player = RandomPolicy.player(Brief("connect four", action_schema=COLUMN), seed=1)
    moves = [asyncio.run(player.act({"legal_actions": [2, 5]}, None)).action for _ in range(20)]
    assert {m["column"] for m in moves if m} == {2, 5}
    assert asyncio.run(player.retry("column 5 is full")).action in ({"column": 2}, {"column": 5})


def test_first_legal_takes_the_first_listed_and_gives_up_when_refused() -> None:
    player = FirstLegal.player(Brief("connect four", action_schema=COLUMN), seed=None)
    assert asyncio.run(player.act({"legal_actions": [4, 1]}, None)).action == {"column": 4}
    assert asyncio.run(player.retry("column 4 is full")).action is None
