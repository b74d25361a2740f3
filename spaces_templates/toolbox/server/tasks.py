"""The task bank: questions whose answers need a fact lookup plus arithmetic or a unit conversion."""

import math
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import permutations

from server.facts import ELEMENTS, FACTS, PLANETS
from server.units import convert

RELATIVE_TOLERANCE = 1e-3
ANSWER_HINT = " Submit a number; answers within 0.1% are accepted."


@dataclass(frozen=True)
class Task:
    """One question with its numeric answer."""

    task_id: str
    question: str
    answer: float

    def accepts(self, answer: float) -> bool:
        return math.isclose(answer, self.answer, rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-9)


def _fact(entity: str, field: str) -> float:
    return float(FACTS[entity][field])


def _element_tasks() -> Iterator[Task]:
    for name in ELEMENTS:
        title = name.capitalize()
        melting, boiling = _fact(name, "melting_point_c"), _fact(name, "boiling_point_c")
        yield Task(
            f"melting-point-f/{name}",
            f"What is the melting point of {title} in degrees Fahrenheit?",
            convert(melting, "C", "F"),
        )
        yield Task(
            f"boiling-point-k/{name}", f"What is the boiling point of {title} in kelvin?", convert(boiling, "C", "K")
        )
        moles = 2 + int(_fact(name, "atomic_number")) % 7
        grams = moles * _fact(name, "atomic_mass_g_per_mol")
        yield Task(
            f"moles-to-ounces/{name}",
            f"What is the mass, in ounces, of {moles} moles of {title}?",
            convert(grams, "g", "oz"),
        )


def _planet_tasks() -> Iterator[Task]:
    for name in PLANETS:
        title = name.capitalize()
        period = _fact(name, "orbital_period_days")
        yield Task(
            f"orbit-years/{name}",
            f"How many years does {title} take to orbit the Sun once?",
            convert(period, "day", "year"),
        )
        yield Task(
            f"distance-miles/{name}",
            f"How far is {title} from the Sun, in miles?",
            convert(_fact(name, "distance_from_sun_km"), "km", "mi"),
        )
        mass = 10 * (2 + len(name))
        yield Task(
            f"weight-newtons/{name}",
            f"What does a {mass} kg object weigh on the surface of {title}, in newtons?",
            mass * _fact(name, "surface_gravity_m_per_s2"),
        )
        yield Task(
            f"days-per-year/{name}",
            f"How many of its own days (length of day) does {title} live through in one of its years (orbital period)?",
            convert(period, "day", "h") / _fact(name, "length_of_day_hours"),
        )
    for larger, smaller in permutations(PLANETS, 2):
        if _fact(larger, "diameter_km") > _fact(smaller, "diameter_km"):
            yield Task(
                f"diameter-ratio/{larger}-{smaller}",
                f"How many times larger is the diameter of {larger.capitalize()} than that of {smaller.capitalize()}?",
                _fact(larger, "diameter_km") / _fact(smaller, "diameter_km"),
            )


def _with_hint(task: Task) -> Task:
    return Task(task.task_id, task.question + ANSWER_HINT, task.answer)


TASKS: tuple[Task, ...] = tuple(_with_hint(task) for task in (*_element_tasks(), *_planet_tasks()))
TASKS_BY_ID = {task.task_id: task for task in TASKS}
