"""The bundled fact table: physical data of chemical elements and of the planets."""

from typing import TypeAlias

Facts: TypeAlias = dict[str, str | int | float]

# Element data are standard reference values (melting and boiling points at 1 atm); planet data follow
# NASA's planetary fact sheet, rounded as published there.
ELEMENT_FIELDS = ("atomic_number", "atomic_mass_g_per_mol", "melting_point_c", "boiling_point_c", "density_g_per_cm3")
ELEMENTS: dict[str, tuple[float, ...]] = {
    "hydrogen": (1, 1.008, -259.16, -252.87, 0.00008988),
    "nitrogen": (7, 14.007, -210.0, -195.79, 0.0012506),
    "oxygen": (8, 15.999, -218.79, -182.96, 0.001429),
    "sodium": (11, 22.99, 97.79, 882.94, 0.968),
    "aluminium": (13, 26.982, 660.32, 2470, 2.70),
    "titanium": (22, 47.867, 1668, 3287, 4.506),
    "iron": (26, 55.845, 1538, 2862, 7.874),
    "copper": (29, 63.546, 1084.62, 2562, 8.96),
    "zinc": (30, 65.38, 419.53, 907, 7.14),
    "silver": (47, 107.87, 961.78, 2162, 10.49),
    "tin": (50, 118.71, 231.93, 2602, 7.287),
    "platinum": (78, 195.08, 1768.3, 3825, 21.45),
    "gold": (79, 196.97, 1064.18, 2970, 19.3),
    "lead": (82, 207.2, 327.46, 1749, 11.34),
}
PLANET_FIELDS = (
    "diameter_km",
    "mass_kg",
    "surface_gravity_m_per_s2",
    "length_of_day_hours",
    "distance_from_sun_km",
    "orbital_period_days",
)
PLANETS: dict[str, tuple[float, ...]] = {
    "mercury": (4879, 0.330e24, 3.7, 4222.6, 57.9e6, 88.0),
    "venus": (12104, 4.87e24, 8.9, 2802.0, 108.2e6, 224.7),
    "earth": (12756, 5.97e24, 9.8, 24.0, 149.6e6, 365.2),
    "mars": (6792, 0.642e24, 3.7, 24.7, 228.0e6, 687.0),
    "jupiter": (142984, 1898e24, 23.1, 9.9, 778.5e6, 4331),
    "saturn": (120536, 568e24, 9.0, 10.7, 1432.0e6, 10747),
    "uranus": (51118, 86.8e24, 8.7, 17.2, 2867.0e6, 30589),
    "neptune": (49528, 102e24, 11.0, 16.1, 4515.0e6, 59800),
}
ALIASES = {"aluminum": "aluminium"}


def _table() -> dict[str, Facts]:
    table: dict[str, Facts] = {}
    for kind, fields, rows in (("element", ELEMENT_FIELDS, ELEMENTS), ("planet", PLANET_FIELDS, PLANETS)):
        for name, values in rows.items():
            table[name] = {"name": name, "kind": kind, **dict(zip(fields, values, strict=True))}
    return table


FACTS = _table()


def find_facts(entity: str) -> Facts | None:
    """The facts about one element or planet, by name (case-insensitive), or None."""
    name = entity.strip().lower()
    return FACTS.get(ALIASES.get(name, name))


def list_entities() -> dict[str, list[str]]:
    """Every entity name in the table, grouped by kind."""
    return {"element": sorted(ELEMENTS), "planet": sorted(PLANETS)}
