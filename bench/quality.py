"""One quality report of each built-in template, with the time of every check.

    .venv/bin/python -m bench.quality [--templates maze wordle ...]

Each template is launched by envhub (process backend) and reported on through its gateway URL,
as `POST /api/checks {"endpoint": ..., "suite": "quality"}` does. The floor: a whole report of a
template in 20 s or less. The figures take about a second of it by design (steps per second at 1
and 8 sessions, half a second each).
"""

import argparse
import asyncio
import time

from bench.report import load_average, machine_line, table, verdict
from conformance.quality import QualityTarget, check_quality
from conformance.report import Figures, Report
from core.outbound import OutboundGuard

REPORT_FLOOR_S = 20.0
TEMPLATES = ("toolbox", "arithmetic_tasks", "connect_four", "wordle", "maze", "lights_out")
LOCAL = OutboundGuard(allow_private=True)


def report_on(url: str, name: str) -> tuple[Report, float]:
    started = time.perf_counter()
    report = asyncio.run(check_quality(QualityTarget(url), LOCAL, timeout_s=10, deadline_s=60))
    return report, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--templates", nargs="*", default=list(TEMPLATES))
    args = parser.parse_args()
    from tests.serving import serve_templates

    print(f"machine: {machine_line()}; load {load_average()}\n")
    reports: dict[str, tuple[Report, float]] = {}
    with serve_templates(*args.templates) as urls:
        for name in args.templates:
            reports[name] = report_on(urls[name], name)
    names = list(reports)
    rows: list[list[object]] = []
    for result in reports[names[0]][0].results:
        rows.append([result.check_id, *(reports[n][0].result(result.check_id).duration_s for n in names)])
    figures = {n: reports[n][0].figures or Figures() for n in names}
    rows.append(["figures", *(figures[n].duration_s for n in names)])
    rows.append(["whole report", *(round(reports[n][1], 2) for n in names)])
    print("One quality report per template through its gateway, seconds per check:\n")
    print(table(["check", *names], rows))
    print("\nResults and figures:\n")
    results = [
        [
            n,
            str(reports[n][0].verdict),
            ", ".join(
                f"{r.check_id.split('.')[1]}={r.status.value}" for r in reports[n][0].results if r.status != "pass"
            )
            or "all pass",
            figures[n].steps_per_s.get("1", "-"),
            figures[n].steps_per_s.get("8", "-"),
            figures[n].capacity if figures[n].capacity is not None else "-",
        ]
        for n in names
    ]
    print(table(["template", "verdict", "not passed", "steps/s @1", "steps/s @8", "sessions held"], results))
    worst = max(seconds for _, seconds in reports.values())
    print(
        f"\nfloor: one report of a template <= {REPORT_FLOOR_S:g} s: {verdict(worst <= REPORT_FLOOR_S)} ({worst:.1f} s)"
    )
    print(f"load after: {load_average()}")


if __name__ == "__main__":
    main()
