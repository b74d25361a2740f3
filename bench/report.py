"""Plain-text tables, percentiles and the machine description the benchmarks print."""

import os
import platform
import sqlite3
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A fixed-width table: text columns left-aligned, numbers right-aligned."""
    cells = [[str(h) for h in headers], *([_cell(v) for v in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [all(_is_number(row[i]) for row in rows) if rows else False for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(row, widths, numeric, strict=True)).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (fraction 0.5 for p50, 0.95 for p95)."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.5)))
    return ordered[rank - 1]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def machine() -> dict[str, str]:
    """What the numbers were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), cpu)
    except OSError:
        pass
    memory = "unknown"
    try:
        free = subprocess.run(["free", "-g"], capture_output=True, text=True, check=True).stdout.splitlines()
        memory = f"{free[1].split()[1]} GiB"
    except (OSError, subprocess.CalledProcessError, IndexError):
        pass
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "memory": memory,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
    }


def load_average() -> str:
    """The 1, 5 and 15 minute load averages: other work on the machine skews the timings."""
    return " / ".join(f"{value:.2f}" for value in os.getloadavg())


def machine_line() -> str:
    m = machine()
    return f"{m['date']}; {m['cpu']}, {m['cores']} cores, {m['memory']} RAM; Python {m['python']}, SQLite {m['sqlite']}"
