"""Writes train.jsonl and test.jsonl beside this script: seeded multi-step word problems with integer answers."""

import json
import random
from collections.abc import Callable
from pathlib import Path

SEED = 20260614
SPLIT_SIZES = {"train": 80, "test": 24}
NAMES = ["Ada", "Bilal", "Chen", "Dara", "Emeka", "Farah", "Goran", "Hana", "Ines", "Jonas", "Kemi", "Luca"]

Problem = tuple[str, int, int]  # question, answer, arithmetic steps


def shop(rng: random.Random) -> Problem:
    boxes, per_box, more = rng.randint(3, 12), rng.randint(6, 24), rng.randint(1, 6)
    sold = rng.randint(1, boxes * per_box - 1)
    question = (
        f"A shop has {boxes} boxes of {per_box} pencils each. It sells {sold} pencils, "
        f"then receives {more} more boxes of {per_box} pencils. How many pencils does it have now?"
    )
    return question, boxes * per_box - sold + more * per_box, 4


def travel(rng: random.Random) -> Problem:
    first_speed, second_speed = rng.randrange(40, 125, 5), rng.randrange(40, 125, 5)
    first_hours, second_hours = rng.randint(2, 6), rng.randint(1, 5)
    question = (
        f"A train travels at {first_speed} km per hour for {first_hours} hours, then at {second_speed} km "
        f"per hour for {second_hours} hours. How many kilometres does it travel in total?"
    )
    return question, first_speed * first_hours + second_speed * second_hours, 3


def sharing(rng: random.Random) -> Problem:
    friends, each, given = rng.randint(3, 9), rng.randint(8, 30), rng.randint(1, 7)
    question = (
        f"{friends} friends share {friends * each} stickers equally. Each friend then gives {given} "
        "stickers to a younger sibling. How many stickers does each friend have left?"
    )
    return question, each - given, 2


def savings(rng: random.Random) -> Problem:
    name, weekly, weeks = rng.choice(NAMES), rng.randint(5, 40), rng.randint(4, 20)
    spent = rng.randint(1, weekly * weeks - 1)
    question = (
        f"{name} saves {weekly} dollars a week for {weeks} weeks, then spends {spent} dollars on a bike. "
        f"{name}'s grandmother then gives as much as {name} has left. How many dollars does {name} have now?"
    )
    return question, 2 * (weekly * weeks - spent), 4


def orchard(rng: random.Random) -> Problem:
    rows, per_row, apples = rng.randint(4, 15), rng.randint(5, 20), rng.randint(10, 60)
    removed = rng.randint(1, rows - 1)
    question = (
        f"An orchard has {rows} rows of {per_row} apple trees. The farmer removes {removed} whole rows. "
        f"Each remaining tree gives {apples} apples. How many apples does the orchard give?"
    )
    return question, (rows - removed) * per_row * apples, 3


def bakery(rng: random.Random) -> Problem:
    box_size, boxes = rng.randint(2, 6), rng.randint(6, 30)
    batches = rng.choice([d for d in range(2, 13) if boxes * box_size % d == 0])
    sold = rng.randint(1, boxes - 1)
    question = (
        f"A bakery bakes {batches} batches of {boxes * box_size // batches} muffins and packs them in boxes of "
        f"{box_size}. It sells {sold} boxes. How many full boxes are left?"
    )
    return question, boxes - sold, 3


def weather(rng: random.Random) -> Problem:
    dawn, rise, fall = rng.randint(-10, 15), rng.randint(2, 15), rng.randint(5, 30)
    question = (
        f"At dawn the temperature is {dawn} degrees. It rises {rise} degrees by noon, then falls {fall} degrees "
        "by midnight. What is the temperature at midnight, in degrees?"
    )
    return question, dawn + rise - fall, 2


def expression(rng: random.Random) -> Problem:
    a, b, c, d, e = (rng.randint(2, 30) for _ in range(5))
    if rng.random() < 0.5:
        return f"Compute ({a} + {b}) * {c} - {d}.", (a + b) * c - d, 3
    return f"Compute {a} * {b} - {c} * {d} + {e}.", a * b - c * d + e, 4


KINDS: dict[str, Callable[[random.Random], Problem]] = {
    "shop": shop,
    "travel": travel,
    "sharing": sharing,
    "savings": savings,
    "orchard": orchard,
    "bakery": bakery,
    "weather": weather,
    "expression": expression,
}


def build_splits(rng: random.Random) -> dict[str, list[dict[str, object]]]:
    """Cycle through the kinds so each split mixes them; no question appears twice across splits."""
    seen: set[str] = set()
    splits: dict[str, list[dict[str, object]]] = {}
    for split, count in SPLIT_SIZES.items():
        tasks: list[dict[str, object]] = []
        while len(tasks) < count:
            kind = list(KINDS)[len(tasks) % len(KINDS)]
            question, answer, steps = KINDS[kind](rng)
            if question in seen:
                continue
            seen.add(question)
            index = len(tasks)
            tasks.append(
                {
                    "id": f"{split}-{index:04d}",
                    "split": split,
                    "index": index,
                    "kind": kind,
                    "steps": steps,
                    "question": question,
                    "answer": answer,
                }
            )
        splits[split] = tasks
    return splits


def main() -> None:
    for split, tasks in build_splits(random.Random(SEED)).items():
        lines = (json.dumps(task, ensure_ascii=False) for task in tasks)
        (Path(__file__).parent / f"{split}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
