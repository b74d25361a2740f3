"""First start: the virtualenv `make run` makes, with envhub's requirements, installed by pip and by uv (uv itself
installed from PyPI first), timed side by side with empty caches, so every package is downloaded as on a fresh clone.

    .venv/bin/python -m bench.install [--rounds 2] [--uv 0.13.8]

Rounds alternate pip and uv, so outside load hits both alike. Each install goes to a new folder with its own empty
cache (pip --no-cache-dir, uv --no-cache), from the Python that runs the benchmark (the one `make` finds).
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from app.settings import REPO_ROOT
from bench.report import load_average, machine_line, percentile, table

REQUIREMENTS = REPO_ROOT / "requirements.txt"


def _run(*argv: str | Path) -> None:
    subprocess.run([str(a) for a in argv], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def with_pip(venv: Path, uv_version: str) -> None:
    """What the Makefile does today: a venv, then pip install -r requirements.txt."""
    _run(sys.executable, "-m", "venv", venv)
    _run(venv / "bin" / "python", "-m", "pip", "--disable-pip-version-check", "-q", "install", "--no-cache-dir",
         "-r", REQUIREMENTS)  # fmt: skip


def with_uv(venv: Path, uv_version: str) -> None:
    """A venv, uv into it from PyPI with pip, then uv installs the requirements into the venv."""
    _run(sys.executable, "-m", "venv", venv)
    _run(venv / "bin" / "python", "-m", "pip", "--disable-pip-version-check", "-q", "install", "--no-cache-dir",
         f"uv=={uv_version}")  # fmt: skip
    _run(venv / "bin" / "uv", "pip", "install", "--no-cache", "--quiet", "--python", venv / "bin" / "python",
         "-r", REQUIREMENTS)  # fmt: skip


def timed(install: Callable[[Path, str], None], uv_version: str) -> float:
    folder = Path(tempfile.mkdtemp(prefix="envhub-install-"))
    try:
        started = time.monotonic()
        install(folder / ".venv", uv_version)
        return time.monotonic() - started
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--uv", default="0.13.8", help="the uv release installed from PyPI")
    args = parser.parse_args()
    print(machine_line(), f"load average {load_average()}", sep="; ")
    seconds: dict[str, list[float]] = {"pip": [], "uv": []}
    for round_ in range(args.rounds):
        for name, install in (("pip", with_pip), ("uv", with_uv)):
            seconds[name].append(timed(install, args.uv))
            print(f"round {round_ + 1}: {name} {seconds[name][-1]:.1f} s", flush=True)
    rows = [(name, len(s), percentile(s, 0.5), min(s), max(s)) for name, s in seconds.items()]
    print(table(["installer", "rounds", "median s", "min s", "max s"], rows))
    ratio = percentile(seconds["pip"], 0.5) / percentile(seconds["uv"], 0.5)
    print(f"pip / uv: {ratio:.2f}x; uv halves the time: {'yes' if ratio >= 2 else 'no'}")
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
