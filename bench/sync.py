"""Sync benchmark: 10,000 environment Spaces and ~200 datasets from a fake Hub in another process.

Run from the repository root: `.venv/bin/python -m bench.sync`. It measures a first full
sync, a resync with nothing changed, a resync after 1% of the Spaces changed, and the
peak memory of a full sync, and checks the floors: full sync <= 60 s, no-change resync <= 3 s.
"""

import argparse
import contextlib
import math
import multiprocessing
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

from bench.hubproc import Change, Clear, Command, Count, CpuTime, Ready, Stop, serve
from bench.report import load_average, machine_line, table, verdict

FULL_SYNC_FLOOR_S = 60.0
RESYNC_FLOOR_S = 3.0
DATASET_TAGS = ("openenv", "rl-environment")


@dataclass(frozen=True)
class Measured:
    """One sync as the client timed it and as the fake Hub counted it."""

    name: str
    wall_s: float
    run_s: float
    client_cpu_s: float
    hub_cpu_s: float
    run_requests: int
    hub_requests: int
    space_pages: int
    dataset_pages: int
    file_requests: int
    added: int
    updated: int
    unchanged: int
    summary: str

    @property
    def listing_pages(self) -> int:
        return self.space_pages + self.dataset_pages


class HubProcess:
    """The fake Hub's process (spawned, so it has its own interpreter and GIL) and its pipe."""

    def __init__(self, spaces: int, seed: int, page_size: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=serve, args=(child, spaces, seed, page_size), name="fakehub", daemon=True
        )
        self._process.start()
        child.close()
        ready = self._conn.recv()
        assert isinstance(ready, Ready)
        self.ready = ready

    def ask(self, command: Command) -> object:
        self._conn.send(command)
        return self._conn.recv()

    def count(self, prefix: str = "") -> int:
        answer = self.ask(Count(prefix))
        assert isinstance(answer, int)
        return answer

    def cpu_s(self) -> float:
        answer = self.ask(CpuTime())
        assert isinstance(answer, float)
        return answer

    def close(self) -> None:
        if self._process.is_alive():
            with contextlib.suppress(OSError, EOFError):
                self.ask(Stop())
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(timeout=5)
        self._conn.close()


def _hub_environment(home: Path) -> None:
    """No telemetry and a throwaway HF_HOME, in place before huggingface_hub makes any call."""
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HOME"] = str(home)
    from huggingface_hub import constants

    constants.HF_HUB_DISABLE_TELEMETRY = True
    constants.HF_HUB_OFFLINE = False


def _sync(name: str, database: Path, hub: HubProcess, *, workers: int) -> Measured:
    # Imported here so that huggingface_hub first loads after _hub_environment has run.
    from catalog.hub import HubClient
    from catalog.models import SyncStatus
    from catalog.sync import Syncer
    from core.db import create_db_engine, init_db

    engine = create_db_engine(f"sqlite:///{database}")
    init_db(engine)
    client = HubClient(hub.ready.url)
    hub.ask(Clear())
    hub_cpu = hub.cpu_s()
    cpu = time.process_time()
    started = time.perf_counter()
    run = Syncer(engine, client, workers=workers).run()
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    engine.dispose()
    if run.status != SyncStatus.OK:
        raise SystemExit(f"{name}: {run.summary()}")
    return Measured(
        name=name,
        wall_s=wall,
        run_s=run.seconds,
        client_cpu_s=cpu,
        hub_cpu_s=hub.cpu_s() - hub_cpu,
        run_requests=run.requests,
        hub_requests=hub.count(),
        space_pages=hub.count("/api/spaces"),
        dataset_pages=hub.count("/api/datasets"),
        file_requests=hub.count("/spaces/"),
        added=run.added,
        updated=run.updated,
        unchanged=run.unchanged,
        summary=run.summary(),
    )


def _max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sync", description="Sync benchmark against a fake Hub")
    parser.add_argument("--spaces", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--page-size", type=int, default=1000, help="items per listing page of the fake Hub")
    parser.add_argument("--workers", type=int, default=8, help="download threads of the Syncer")
    parser.add_argument("--change-every", type=int, default=100, help="change every N-th Space (100: 1%%)")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    print(f"machine: {machine_line()}")
    print(f"load average at start: {load_average()}")
    with tempfile.TemporaryDirectory(prefix="envhub-bench-sync-") as tmp:
        folder = Path(tmp)
        _hub_environment(folder / "hf_home")
        hub = HubProcess(args.spaces, args.seed, args.page_size)
        try:
            ready = hub.ready
            tagged = ", ".join(f"{ready.dataset_tags.get(t, 0)} tagged {t}" for t in DATASET_TAGS)
            print(
                f"fake Hub: {ready.spaces:,} Spaces and {ready.datasets} datasets ({tagged}), "
                f"listing pages of {args.page_size}, built in {ready.seconds:.1f} s, serving {ready.url}"
            )
            database = folder / "catalog.db"
            full = _sync("full first sync", database, hub, workers=args.workers)
            print(f"  {full.name}: {full.summary}")
            same = _sync("no-change resync", database, hub, workers=args.workers)
            print(f"  {same.name}: {same.summary}")
            changed_ids = hub.ask(Change(args.change_every))
            assert isinstance(changed_ids, list)
            changed = _sync(f"resync, {len(changed_ids)} changed", database, hub, workers=args.workers)
            print(f"  {changed.name}: {changed.summary}")
            rss_timed = _max_rss_mib()

            # tracemalloc slows every allocation down, so the peak comes from a separate
            # full sync into a fresh database rather than from the timed one.
            tracemalloc.start()
            traced = _sync("full sync, traced", folder / "traced.db", hub, workers=args.workers)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            print(f"  {traced.name}: {traced.summary}")
        finally:
            hub.close()
    print(f"load average at end: {load_average()}; the benchmark took {time.perf_counter() - began:.0f} s")

    pages = math.ceil(ready.spaces / args.page_size) + sum(
        max(1, math.ceil(ready.dataset_tags.get(tag, 0) / args.page_size)) for tag in DATASET_TAGS
    )
    expected = {full.name: pages + 2 * ready.spaces, same.name: pages, changed.name: pages + 2 * len(changed_ids)}
    headers = ["sync", "wall s", "client CPU s", "hub CPU s", "requests (run)", "requests (hub)", "pages"]
    headers += ["file GETs", "expected requests"]
    print()
    print(
        table(
            headers,
            [
                [
                    m.name,
                    m.wall_s,
                    m.client_cpu_s,
                    m.hub_cpu_s,
                    m.run_requests,
                    m.hub_requests,
                    m.listing_pages,
                    m.file_requests,
                    expected[m.name],
                ]
                for m in (full, same, changed)
            ],
        )
    )
    print(
        f"listing pages: {full.space_pages} of Spaces + {full.dataset_pages} of datasets = {full.listing_pages} "
        f"(expected {pages}); the full sync indexed {ready.spaces / full.wall_s:,.0f} Spaces/s"
    )
    print()
    print(
        table(
            ["memory of the syncing process", "MiB"],
            [
                ["tracemalloc peak during a full sync", peak / 2**20],
                ["max RSS after the timed syncs", rss_timed],
                ["max RSS at the end (after the traced sync)", _max_rss_mib()],
            ],
        )
    )

    checks = [
        (
            f"full sync <= {FULL_SYNC_FLOOR_S:g} s",
            full.wall_s <= FULL_SYNC_FLOOR_S and full.added == ready.spaces,
            f"{full.wall_s:.1f} s, {full.added:,} added",
        ),
        (f"no-change resync <= {RESYNC_FLOOR_S:g} s", same.wall_s <= RESYNC_FLOOR_S, f"{same.wall_s:.2f} s"),
        (
            "no-change resync requests == listing pages",
            same.run_requests == same.hub_requests == same.listing_pages == pages,
            f"{same.run_requests} (run), {same.hub_requests} (hub), {pages} pages",
        ),
        (
            "1% resync fetches only changed Spaces",
            changed.file_requests == 2 * len(changed_ids) and changed.updated == len(changed_ids),
            f"{changed.file_requests} file GETs, {changed.updated} updated of {len(changed_ids)} changed",
        ),
    ]
    print()
    print(table(["check", "result", "measured"], [[name, verdict(ok), got] for name, ok, got in checks]))
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
