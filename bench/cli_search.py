"""`python -m app search x` start-up, wall clock, in checkouts given on the command line (the newest last), runs
interleaved so that the machine's load falls on each alike; prints the median of each and their ratio.

`.venv/bin/python -m bench.cli_search BEFORE_CHECKOUT . [RUNS]`: each runs on its own SQLite file in a temporary
folder, after one warm-up run that makes the file and indexes the templates.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(checkout: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "app", "search", "x"], cwd=checkout, env=env, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - started


def main() -> None:
    checkouts = [Path(p).resolve() for p in sys.argv[1:3]]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as scratch:
        envs = []
        for index, checkout in enumerate(checkouts):
            data = Path(scratch) / str(index)
            env = os.environ | {"ENVHUB_DATABASE_URL": f"sqlite:///{data / 'envhub.db'}", "ENVHUB_DATA_DIR": str(data)}
            env["ENVHUB_TEMPLATES_DIR"] = str(checkout / "spaces_templates")
            timed(checkout, env)
            envs.append(env)
        times: list[list[float]] = [[] for _ in checkouts]
        for _ in range(runs):
            for index, checkout in enumerate(checkouts):
                times[index].append(timed(checkout, envs[index]))
    medians = [statistics.median(t) for t in times]
    for checkout, spent, median in zip(checkouts, times, medians, strict=True):
        print(f"{checkout}: median {median:.2f} s of {', '.join(f'{t:.2f}' for t in spent)}")
    print(f"ratio (last / first): {medians[-1] / medians[0]:.2f}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
