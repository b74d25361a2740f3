"""A safe arithmetic evaluator: a tokenizer and a recursive-descent parser, never eval()."""

import math
import re
from collections.abc import Callable

MAX_LENGTH = 500
MAX_NESTING = 50

TOKEN = re.compile(r"\s*(?:(\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|([A-Za-z_]\w*)|(\*\*|[-+*/%^(),]))")
CONSTANTS = {"pi": math.pi, "e": math.e}


class CalculationError(ValueError):
    """The expression is malformed or cannot be computed."""


def _round(value: float, digits: float = 0) -> float:
    if not float(digits).is_integer():
        raise CalculationError("round() needs a whole number of digits")
    return round(value, int(digits))


FUNCTIONS: dict[str, tuple[Callable[..., float], int, int]] = {
    "sqrt": (math.sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "exp": (math.exp, 1, 1),
    "log": (math.log, 1, 2),
    "log10": (math.log10, 1, 1),
    "round": (_round, 1, 2),
    "min": (min, 2, 16),
    "max": (max, 2, 16),
}


def tokenize(expression: str) -> list[str]:
    """Split an expression into number, name and operator tokens."""
    tokens: list[str] = []
    text = expression.rstrip()
    position = 0
    while position < len(text):
        match = TOKEN.match(text, position)
        if match is None:
            offending = text[position:].lstrip()[0]
            raise CalculationError(f"unexpected character {offending!r} in the expression")
        tokens.append(match.group(match.lastindex or 0))
        position = match.end()
    return tokens


class Parser:
    """Evaluates tokens with the usual precedence; power binds tighter than unary minus and is right-associative."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.position = 0
        self.nesting = 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None:
            raise CalculationError("the expression ends too early" + (f"; expected {expected!r}" if expected else ""))
        if expected is not None and token != expected:
            raise CalculationError(f"expected {expected!r} but found {token!r}")
        self.position += 1
        return token

    def expression(self) -> float:
        value = self.term()
        while self.peek() in ("+", "-"):
            operator = self.take()
            right = self.term()
            value = value + right if operator == "+" else value - right
        return value

    def term(self) -> float:
        value = self.unary()
        while self.peek() in ("*", "/", "%"):
            operator = self.take()
            right = self.unary()
            if operator != "*" and right == 0:
                raise CalculationError("division by zero")
            value = value * right if operator == "*" else value / right if operator == "/" else value % right
        return value

    def unary(self) -> float:
        if self.peek() in ("+", "-"):
            sign = -1.0 if self.take() == "-" else 1.0
            return sign * self.unary()
        return self.power()

    def power(self) -> float:
        base = self.atom()
        if self.peek() not in ("**", "^"):
            return base
        self.take()
        exponent = self.unary()
        if base == 0 and exponent < 0:
            raise CalculationError("division by zero")
        result: float | complex = base**exponent
        if isinstance(result, complex):
            raise CalculationError("a negative number to a fractional power has no real value")
        return result

    def atom(self) -> float:
        token = self.take()
        if token == "(":
            self.enter()
            value = self.expression()
            self.leave()
            return value
        if token[0].isdigit() or token[0] == ".":
            return float(token)
        if token in CONSTANTS:
            return CONSTANTS[token]
        if token in FUNCTIONS:
            return self.call(token)
        raise CalculationError(f"unknown name or misplaced symbol {token!r}")

    def call(self, name: str) -> float:
        function, least, most = FUNCTIONS[name]
        self.take("(")
        self.enter()
        arguments = [self.expression()]
        while self.peek() == ",":
            self.take()
            arguments.append(self.expression())
        self.leave()
        if not least <= len(arguments) <= most:
            raise CalculationError(f"{name}() takes {least} to {most} arguments, got {len(arguments)}")
        try:
            return float(function(*arguments))
        except CalculationError:
            raise
        except (ValueError, ZeroDivisionError) as error:
            shown = ", ".join(f"{argument:g}" for argument in arguments)
            raise CalculationError(f"{name}({shown}) is undefined") from error

    def enter(self) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise CalculationError(f"parentheses are nested deeper than {MAX_NESTING} levels")

    def leave(self) -> None:
        self.take(")")
        self.nesting -= 1


def evaluate(expression: str) -> float:
    """Compute an arithmetic expression: + - * / % ** (or ^), parentheses, pi, e, sqrt, log, round and friends."""
    if len(expression) > MAX_LENGTH:
        raise CalculationError(f"the expression is longer than {MAX_LENGTH} characters")
    tokens = tokenize(expression)
    if not tokens:
        raise CalculationError("the expression is empty")
    parser = Parser(tokens)
    try:
        value = parser.expression()
    except OverflowError as error:
        raise CalculationError("the result is too large") from error
    except RecursionError as error:
        raise CalculationError("the expression is nested too deeply") from error
    if parser.peek() is not None:
        raise CalculationError(f"unexpected {parser.peek()!r} after a complete expression")
    if not math.isfinite(value):
        raise CalculationError("the result is too large")
    return value
