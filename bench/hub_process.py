"""The process backend on a Hub Space against the same folder as a template, by phase.

    .venv/bin/python -m bench.hub_process [--repeat 3] [--megabytes 0]

A fake Hub (tests/fakehub.py, in this process) holds the count environment as a Space; each
round launches a new Space (its first launch: check, download, start), the same files as a
template (check, start) and the Space's revision again (check, start: nothing to download).
All three fork from one zygote, started before timing, so the figures differ by what the
Space adds. --megabytes adds a data file of that size to the Space, to see the download grow.
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

import httpx

from bench.report import load_average, machine_line, percentile, table
from catalog.models import EnvironmentDetail, Source
from hosting.options import ProcessOptions
from hosting.runtimes.base import LaunchSpec
from hosting.runtimes.process import ProcessRuntime
from tests.environments import write_count_env
from tests.fakehub import FakeHub

__all__ = ["run"]


def _timed_launch(
    runtime: ProcessRuntime, environment: EnvironmentDetail, logs: Path, *, download: bool
) -> list[float]:
    """Seconds of check, download (0 when not asked) and start, the server stopped after."""
    started = time.perf_counter()
    options = runtime.check(environment, ProcessOptions())
    checked = time.perf_counter()
    if download:
        runtime.snapshots.fetch(environment.id, environment.sha or "", None, lambda _: None)
    downloaded = time.perf_counter()
    server = f"bench-{len(list(logs.iterdir()))}"
    launched = runtime.start(LaunchSpec(server, environment, logs / f"{server}.log", options), lambda _: None)
    ready = time.perf_counter()
    runtime.stop(launched.handle)
    return [checked - started, downloaded - checked, ready - downloaded]


def run(repeat: int = 3, megabytes: int = 0) -> None:
    """Launch repeat rounds and print the phases' medians."""
    with tempfile.TemporaryDirectory(prefix="envhub-bench-") as scratch, FakeHub() as hub:
        root = Path(scratch)
        os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        template = write_count_env(root / "templates" / "count", layout="by_name")
        files = {p.relative_to(template).as_posix(): p.read_bytes() for p in template.rglob("*") if p.is_file()}
        if megabytes:
            files["data/payload.bin"] = os.urandom(megabytes * 1_000_000)
        logs = root / "logs"
        logs.mkdir()
        runtime = ProcessRuntime(root / "runtime", preload=True, hub_endpoint=hub.url)
        runtime.warm()
        as_template = EnvironmentDetail(id="template:count", source=Source.TEMPLATE, title="Count", path=str(template))
        samples: dict[str, list[list[float]]] = {"first": [], "template": [], "again": []}
        load_before = load_average()
        try:
            for round_ in range(repeat):
                space_id = f"alice/count-{round_}"
                hub.add_space(space_id, files=files)
                sha = httpx.get(f"{hub.url}/api/spaces/{space_id}").json()["sha"]
                space = EnvironmentDetail(id=space_id, source=Source.HUB, title="Count", sdk="docker", sha=sha)
                samples["first"].append(_timed_launch(runtime, space, logs, download=True))
                samples["template"].append(_timed_launch(runtime, as_template, logs, download=False))
                samples["again"].append(_timed_launch(runtime, space, logs, download=False))
        finally:
            runtime.close()
    names = {"first": "Space, first launch", "template": "same folder as a template", "again": "Space, same revision"}
    rows = []
    for key, rounds in samples.items():
        phases = [percentile([launch[i] for launch in rounds], 0.5) for i in range(3)]
        total = percentile([sum(launch) for launch in rounds], 0.5)
        rows.append([names[key], len(rounds), phases[0], phases[1], phases[2], total])
    print(machine_line())
    size = sum(map(len, files.values())) / 1e6
    print(f"{len(files)} files, {size:.1f} MB; load average before: {load_before}; after: {load_average()}")
    print(table(["launch", "n", "check s", "download s", "start s", "total p50 s"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--megabytes", type=int, default=0, help="a data file of this size in the Space")
    arguments = parser.parse_args()
    run(arguments.repeat, arguments.megabytes)


if __name__ == "__main__":
    main()
