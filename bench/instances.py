"""Instances benchmark: search p95 and API throughput on SQLite and Postgres, one instance against two.

Run from the repository root: `.venv/bin/python -m bench.instances` (SQLite only), or with
`--postgres postgresql+psycopg://user:password@host/db` (or ENVHUB_BENCH_POSTGRES_URL) to
add Postgres: the benchmark works in a schema of its own there, dropped at the end, so
the role needs CREATE on the database.

For each database, 100,000 generated environments (bench/corpus.py) are written the way
a sync writes them. Then:

- search: one client asks one instance for the 20 queries of bench/search.py in turn,
  through GET /api/environments (a page of 20 and the count), as the UI and API do;
- throughput: a load generator in this process keeps `--concurrency` requests in flight
  for `--duration` seconds (a mix of searches, browse pages and environment details),
  first against one instance, then spread evenly over two instances on the same database.

Floors: Postgres search p95 <= 50 ms; two instances >= 1.3x the requests per second of one.
CPU time of every instance and of the load generator is read from /proc, so the table
shows what the machine's cores went to.
"""

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

import httpx
from sqlalchemy import make_url, text

from app.settings import REPO_ROOT
from bench.corpus import Corpus
from bench.envhub import envhub_server
from bench.report import load_average, machine_line, percentile, table, verdict
from bench.search import QUERIES, populate
from catalog.search import EnvironmentQuery, Sort
from core.db import create_db_engine, init_db
from tests.postgres import postgres_schema

PG_P95_FLOOR_MS = 50.0
SCALE_FLOOR = 1.3
TEMPLATES = REPO_ROOT / "spaces_templates"


def query_path(query: EnvironmentQuery) -> str:
    params: list[tuple[str, str]] = [("q", query.q)] + [("tag", t) for t in query.tags]
    if query.sort != Sort.RELEVANCE:
        params.append(("sort", query.sort.value))
    return "/api/environments?" + urlencode(params)


def request_mix(environments: int, seed: int) -> list[str]:
    """What the load generator asks for: searches as typed, browse pages by likes and trending, details."""
    rng = random.Random(seed)
    searches = [query_path(q) for _, q in QUERIES]
    browse = [f"/api/environments?sort={s.value}&offset={o}" for s in (Sort.LIKES, Sort.TRENDING) for o in (0, 20, 40)]
    ids = [space.id for space in Corpus(seed).spaces(min(environments, 2_000))]
    details = [f"/api/environments/{i}" for i in rng.sample(ids, min(len(ids), 40))]
    return searches * 3 + browse * 2 + details  # about half searches, a fifth browsing, the rest details


def _stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (none where the process is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def cpu_seconds(pid: int, *, reaped_children: bool = False) -> float:
    """User + system CPU time of a process so far, from /proc (0 where there is none); with
    reaped_children, also that of the children it has waited for."""
    fields = _stat(pid)
    if not fields:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if reaped_children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def postgres_cpu_seconds() -> float:
    """CPU time so far of every local Postgres server: its live processes, and the backends that
    have exited (counted in the postmaster, which reaps them), so the total never goes down."""
    comms: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                comms[int(entry.name)] = (entry / "comm").read_text().strip()
            except OSError:
                continue
    total = 0.0
    for pid, comm in comms.items():
        if comm == "postgres":
            fields = _stat(pid)
            postmaster = bool(fields) and comms.get(int(fields[1])) != "postgres"
            total += cpu_seconds(pid, reaped_children=postmaster)
    return total


@dataclass
class Load:
    instances: int
    seconds: float
    requests: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    instance_cpu: list[float] = field(default_factory=list)
    client_cpu: float = 0.0
    database_cpu: float = 0.0  # local Postgres processes; SQLite runs inside the instances

    @property
    def rate(self) -> float:
        return self.requests / self.seconds


async def _drive(
    servers: list[tuple[str, int]], paths: list[str], concurrency: int, warmup_s: float, duration_s: float
) -> Load:
    load = Load(len(servers), duration_s)
    urls = [u for u, _ in servers]
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    clients = [httpx.AsyncClient(base_url=u, timeout=30, limits=limits) for u in urls]
    start = time.perf_counter()
    measure_from, end = start + warmup_s, start + warmup_s + duration_s

    async def worker(index: int) -> None:
        client, rng = clients[index % len(clients)], random.Random(index)
        while (now := time.perf_counter()) < end:
            response = await client.get(rng.choice(paths))
            done = time.perf_counter()
            if now >= measure_from and done <= end:
                load.requests += 1
                load.errors += response.status_code != 200
                load.latencies.append((done - now) * 1000)

    async def cpu_meter() -> None:
        """CPU time over the counted seconds only, not the warm-up."""
        await asyncio.sleep(warmup_s)
        instances_before = [cpu_seconds(pid) for _, pid in servers]
        client_before, database_before = time.process_time(), postgres_cpu_seconds()
        await asyncio.sleep(duration_s)
        load.client_cpu = time.process_time() - client_before
        load.database_cpu = postgres_cpu_seconds() - database_before
        load.instance_cpu = [cpu_seconds(pid) - b for (_, pid), b in zip(servers, instances_before, strict=True)]

    try:
        await asyncio.gather(cpu_meter(), *(worker(i) for i in range(concurrency)))
    finally:
        for client in clients:
            await client.aclose()
    return load


def throughput(
    servers: list[tuple[str, int]], paths: list[str], concurrency: int, warmup_s: float, duration_s: float
) -> Load:
    return asyncio.run(_drive(servers, paths, concurrency, warmup_s, duration_s))


def search_latencies(url: str, reps: int) -> dict[str, list[float]]:
    """Each query `reps` times after one warm-up, interleaved, one request at a time."""
    samples: dict[str, list[float]] = {query_path(q): [] for _, q in QUERIES}
    with httpx.Client(base_url=url, timeout=60) as client:
        for path in samples:
            client.get(path).raise_for_status()
        for _ in range(reps):
            for path, times in samples.items():
                started = time.perf_counter()
                client.get(path).raise_for_status()
                times.append((time.perf_counter() - started) * 1000)
    return samples


@dataclass
class Outcome:
    database: str
    search: dict[str, list[float]]
    loads: list[Load]
    populate_s: float


@contextmanager
def instances(scratch: Path, url: str, count: int) -> Iterator[list[tuple[str, int]]]:
    with ExitStack() as stack:
        servers = []
        for index in range(count):
            folder = scratch / f"instance-{index}"
            folder.mkdir(exist_ok=True)
            base, process = stack.enter_context(envhub_server(folder, TEMPLATES, url))
            servers.append((base, process.pid))
        yield servers


def fresh_catalog(url: str, environments: int, seed: int) -> float:
    """An empty catalog at `url` filled with the generated environments; seconds spent writing."""
    engine = create_db_engine(url)
    init_db(engine)
    seconds = populate(engine, environments, seed, 200)
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("VACUUM ANALYZE"))  # as autovacuum would soon after a sync
    engine.dispose()
    return seconds


def run_database(name: str, url: str, scratch: Path, args: argparse.Namespace) -> Outcome:
    print(f"{name}: writing {args.environments:,} environments ...", flush=True)
    seconds = fresh_catalog(url, args.environments, args.seed)
    print(f"{name}: written in {seconds:.1f} s; starting instances", flush=True)
    paths = request_mix(args.environments, args.seed)
    with instances(scratch, url, 2) as servers:
        search = search_latencies(servers[0][0], args.reps)
        loads = []
        for count in (1, 2):
            load = throughput(servers[:count], paths, args.concurrency, args.warmup, args.duration)
            print(f"{name}: {count} instance(s): {load.rate:,.0f} requests/s", flush=True)
            loads.append(load)
    return Outcome(name, search, loads, seconds)


def report(outcomes: list[Outcome], cores: int) -> bool:
    print()
    rows: list[list[object]] = []
    for o in outcomes:
        every = [t for times in o.search.values() for t in times]
        worst = max(o.search, key=lambda p: percentile(o.search[p], 0.95))
        rows.append(
            [o.database, len(every), percentile(every, 0.5), percentile(every, 0.95), max(every), worst, o.populate_s]
        )
    print("search through GET /api/environments, one client, one instance; milliseconds")
    print(table(["database", "requests", "p50", "p95", "max", "slowest query at p95", "populate s"], rows))

    print()
    rows = []
    for o in outcomes:
        for load in o.loads:
            rows.append(
                [
                    o.database,
                    load.instances,
                    load.requests,
                    load.errors,
                    load.rate,
                    percentile(load.latencies, 0.5),
                    percentile(load.latencies, 0.95),
                    " + ".join(f"{c:.1f}" for c in load.instance_cpu),
                    load.client_cpu,
                    load.database_cpu,
                    (sum(load.instance_cpu) + load.client_cpu + load.database_cpu) / (load.seconds * cores),
                ]
            )
    print(f"throughput, the same load on one instance and spread over two; {cores} cores")
    print(
        table(
            [
                "database",
                "instances",
                "requests",
                "errors",
                "req/s",
                "p50 ms",
                "p95 ms",
                "instance CPU s",
                "client CPU s",
                "postgres CPU s",
                "cores busy",
            ],
            rows,
        )
    )
    print("(postgres CPU = every local postgres process; cores busy = CPU seconds of the instances, the load")
    print(" generator and postgres / (seconds x cores))")

    checks = []
    for o in outcomes:
        every = [t for times in o.search.values() for t in times]
        p95 = percentile(every, 0.95)
        if o.database == "postgres":
            checks.append((f"postgres search p95 <= {PG_P95_FLOOR_MS:g} ms", p95 <= PG_P95_FLOOR_MS, f"{p95:.1f} ms"))
        one, two = o.loads
        ratio = two.rate / one.rate
        checks.append(
            (
                f"{o.database}: two instances >= {SCALE_FLOOR:g}x one",
                ratio >= SCALE_FLOOR,
                f"{two.rate:,.0f} / {one.rate:,.0f} req/s = {ratio:.2f}x",
            )
        )
    print()
    print(table(["check", "result", "measured"], [[name, verdict(ok), got] for name, ok, got in checks]))
    return all(ok for _, ok, _ in checks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instances", description="Instances benchmark")
    parser.add_argument("--environments", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument(
        "--postgres",
        default=os.environ.get("ENVHUB_BENCH_POSTGRES_URL"),
        help="a Postgres database to use a new schema of (dropped at the end); none: SQLite only",
    )
    parser.add_argument("--reps", type=int, default=10, help="timed requests per search query")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight during the load")
    parser.add_argument("--warmup", type=float, default=3, help="seconds of load before counting")
    parser.add_argument("--duration", type=float, default=20, help="seconds of counted load per run")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    cores = os.cpu_count() or 1
    print(f"machine: {machine_line()}")
    print(f"load average at start: {load_average()}")
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="envhub-bench-instances-") as tmp:
        scratch = Path(tmp)
        database = scratch / "catalog.db"
        outcomes.append(run_database("sqlite", f"sqlite:///{database}", scratch, args))
        if args.postgres:
            print(f"postgres: {make_url(args.postgres).render_as_string(hide_password=True)}")
            with postgres_schema(args.postgres, "bench_instances") as url:
                outcomes.append(run_database("postgres", url, scratch, args))
        else:
            print("postgres: skipped (no --postgres URL or ENVHUB_BENCH_POSTGRES_URL)")
    print(f"load average at end: {load_average()}; the benchmark took {time.perf_counter() - began:.0f} s")
    return 0 if report(outcomes, cores) else 1


if __name__ == "__main__":
    sys.exit(main())
