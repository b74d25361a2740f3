"""Unit conversion between common units of length, mass, time, volume, speed, energy, pressure and temperature."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    """A unit as a multiple of its dimension's base unit."""

    symbol: str
    dimension: str
    factor: float
    aliases: tuple[str, ...] = ()


UNITS = (
    Unit("mm", "length", 0.001, ("millimeter", "millimeters", "millimetre", "millimetres")),
    Unit("cm", "length", 0.01, ("centimeter", "centimeters", "centimetre", "centimetres")),
    Unit("m", "length", 1.0, ("meter", "meters", "metre", "metres")),
    Unit("km", "length", 1000.0, ("kilometer", "kilometers", "kilometre", "kilometres")),
    Unit("in", "length", 0.0254, ("inch", "inches")),
    Unit("ft", "length", 0.3048, ("foot", "feet")),
    Unit("yd", "length", 0.9144, ("yard", "yards")),
    Unit("mi", "length", 1609.344, ("mile", "miles")),
    Unit("nmi", "length", 1852.0, ("nautical mile", "nautical miles")),
    Unit("au", "length", 149_597_870_700.0, ("astronomical unit", "astronomical units")),
    Unit("mg", "mass", 1e-6, ("milligram", "milligrams")),
    Unit("g", "mass", 0.001, ("gram", "grams")),
    Unit("kg", "mass", 1.0, ("kilogram", "kilograms")),
    Unit("t", "mass", 1000.0, ("tonne", "tonnes", "metric ton", "metric tons")),
    Unit("oz", "mass", 0.028349523125, ("ounce", "ounces")),
    Unit("lb", "mass", 0.45359237, ("pound", "pounds", "lbs")),
    Unit("ms", "time", 0.001, ("millisecond", "milliseconds")),
    Unit("s", "time", 1.0, ("second", "seconds", "sec")),
    Unit("min", "time", 60.0, ("minute", "minutes")),
    Unit("h", "time", 3600.0, ("hour", "hours", "hr")),
    Unit("day", "time", 86_400.0, ("days", "d")),
    Unit("week", "time", 604_800.0, ("weeks",)),
    Unit("year", "time", 31_557_600.0, ("years", "yr", "julian year")),
    Unit("mL", "volume", 0.001, ("milliliter", "milliliters", "millilitre", "millilitres")),
    Unit("L", "volume", 1.0, ("liter", "liters", "litre", "litres")),
    Unit("m3", "volume", 1000.0, ("cubic meter", "cubic meters", "cubic metre", "cubic metres")),
    Unit("fl oz", "volume", 0.0295735295625, ("fluid ounce", "fluid ounces", "floz")),
    Unit("cup", "volume", 0.2365882365, ("cups",)),
    Unit("gal", "volume", 3.785411784, ("gallon", "gallons", "us gallon", "us gallons")),
    Unit("m/s", "speed", 1.0, ("meters per second", "metres per second", "mps")),
    Unit("km/h", "speed", 1 / 3.6, ("kph", "kmh", "kilometers per hour", "kilometres per hour")),
    Unit("mph", "speed", 0.44704, ("miles per hour",)),
    Unit("knot", "speed", 1852 / 3600, ("knots", "kn")),
    Unit("J", "energy", 1.0, ("joule", "joules")),
    Unit("kJ", "energy", 1000.0, ("kilojoule", "kilojoules")),
    Unit("cal", "energy", 4.184, ("calorie", "calories")),
    Unit("kcal", "energy", 4184.0, ("kilocalorie", "kilocalories")),
    Unit("kWh", "energy", 3_600_000.0, ("kilowatt hour", "kilowatt hours")),
    Unit("Pa", "pressure", 1.0, ("pascal", "pascals")),
    Unit("kPa", "pressure", 1000.0, ("kilopascal", "kilopascals")),
    Unit("bar", "pressure", 100_000.0, ("bars",)),
    Unit("atm", "pressure", 101_325.0, ("atmosphere", "atmospheres")),
    Unit("psi", "pressure", 6894.757293168361, ("pounds per square inch",)),
)
# Temperatures are affine, not multiples of a base unit, so they convert through kelvin separately.
TO_KELVIN = {
    "c": (1.0, 273.15),
    "f": (5 / 9, 273.15 - 32 * 5 / 9),
    "k": (1.0, 0.0),
}
TEMPERATURE_ALIASES = {
    "c": ("celsius", "°c", "degc", "degrees celsius"),
    "f": ("fahrenheit", "°f", "degf", "degrees fahrenheit"),
    "k": ("kelvin", "kelvins"),
}
BY_NAME = {name.lower(): unit for unit in UNITS for name in (unit.symbol, *unit.aliases)}
TEMPERATURE_BY_NAME = {name: symbol for symbol, names in TEMPERATURE_ALIASES.items() for name in (symbol, *names)}


class ConversionError(ValueError):
    """The units are unknown or measure different things."""


def supported_units() -> dict[str, list[str]]:
    """Unit symbols grouped by what they measure."""
    groups: dict[str, list[str]] = {}
    for unit in UNITS:
        groups.setdefault(unit.dimension, []).append(unit.symbol)
    groups["temperature"] = ["C", "F", "K"]
    return groups


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """Convert value from one unit to another of the same dimension."""
    source, target = _normalize(from_unit), _normalize(to_unit)
    if source in TEMPERATURE_BY_NAME and target in TEMPERATURE_BY_NAME:
        scale, offset = TO_KELVIN[TEMPERATURE_BY_NAME[source]]
        back_scale, back_offset = TO_KELVIN[TEMPERATURE_BY_NAME[target]]
        return (value * scale + offset - back_offset) / back_scale
    first, second = _lookup(from_unit), _lookup(to_unit)
    if first.dimension != second.dimension:
        raise ConversionError(f"cannot convert {first.dimension} ({from_unit}) to {second.dimension} ({to_unit})")
    return value * first.factor / second.factor


def _normalize(name: str) -> str:
    return " ".join(name.strip().lower().split())


def _lookup(name: str) -> Unit:
    normalized = _normalize(name)
    if normalized in BY_NAME:
        return BY_NAME[normalized]
    if normalized in TEMPERATURE_BY_NAME:
        raise ConversionError(f"{name!r} is a temperature and converts only to C, F or K")
    raise ConversionError(f"unknown unit {name!r}; supported units: {supported_units()}")
