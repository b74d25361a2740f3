"""Search benchmark: 20 representative queries over 100,000 environments in SQLite.

Run from the repository root: `.venv/bin/python -m bench.search`. Each query is timed
through `catalog.search.search_environments` (a page of 20 and the total count), beside
the bare FTS5 query with the same MATCH string and a LIKE scan, and the floors are
checked: search p95 <= 25 ms and within 2x of the bare FTS5 query.
"""

import argparse
import hashlib
import itertools
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session

from bench.corpus import Corpus, environment_row
from bench.report import load_average, machine_line, percentile, table, verdict
from catalog.search import EnvironmentQuery, Sort, fts_match, query_terms, search_environments
from catalog.store import write_environments
from core.db import create_db_engine, init_db

P95_FLOOR_MS = 25.0
RATIO_FLOOR = 2.0
FTS_SQL = "SELECT rowid FROM environment_fts WHERE environment_fts MATCH ? ORDER BY rank LIMIT 20"

QUERIES: list[tuple[str, EnvironmentQuery]] = [
    ("common word", EnvironmentQuery(q="agent")),
    ("common word", EnvironmentQuery(q="environment")),
    ("common word", EnvironmentQuery(q="reward")),
    ("theme word", EnvironmentQuery(q="chess")),
    ("theme word", EnvironmentQuery(q="wordle")),
    ("theme word", EnvironmentQuery(q="sudoku")),
    ("theme word", EnvironmentQuery(q="browser")),
    ("rare word", EnvironmentQuery(q="quoridor")),
    ("rare word", EnvironmentQuery(q="hanabi")),
    ("rarest word", EnvironmentQuery(q="zugzwang")),
    ("two words", EnvironmentQuery(q="chess opponent")),
    ("two words", EnvironmentQuery(q="trading portfolio")),
    ("two words", EnvironmentQuery(q="maze navigation")),
    ("two words", EnvironmentQuery(q="coding sandbox")),
    ("prefix as typed", EnvironmentQuery(q="wor")),
    ("tag filter", EnvironmentQuery(q="puzzle", tags=["games"])),
    ("tag filter", EnvironmentQuery(q="agent", tags=["finance"])),
    ("sort by likes", EnvironmentQuery(q="chess", sort=Sort.LIKES)),
    ("sort by likes", EnvironmentQuery(q="environment", sort=Sort.LIKES)),
    ("no match", EnvironmentQuery(q="xylophone")),
]
METHODS = ("search", "fts5", "like")


@dataclass
class QueryTimes:
    kind: str
    query: EnvironmentQuery
    match: str
    count: int = 0
    samples: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in METHODS})
    cpu: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in METHODS})

    def label(self) -> str:
        extra = [f"tags={','.join(self.query.tags)}"] if self.query.tags else []
        if self.query.sort != Sort.RELEVANCE:
            extra.append(f"sort={self.query.sort.value}")
        return " ".join([repr(self.query.q), *extra])


def populate(engine: Engine, count: int, seed: int, batch: int) -> float:
    """Write `count` generated environments the way a sync does; returns seconds spent writing."""
    corpus = Corpus(seed)
    spaces = corpus.spaces(count)
    writing = 0.0
    with Session(engine) as session:
        while part := list(itertools.islice(spaces, batch)):
            rows = [environment_row(s, sha=hashlib.sha1(s.id.encode()).hexdigest()) for s in part]
            started = time.perf_counter()
            write_environments(session, rows, {s.id: s.datasets for s in part})
            writing += time.perf_counter() - started
        started = time.perf_counter()
        session.commit()
        writing += time.perf_counter() - started
    return writing


def _like_sql(terms: list[str]) -> tuple[str, list[str]]:
    where = " AND ".join(["(title LIKE ? OR description LIKE ? OR readme LIKE ?)"] * len(terms))
    params = [f"%{t}%" for t in terms for _ in range(3)]
    return f"SELECT rowid FROM environment WHERE removed_at IS NULL AND {where} LIMIT 20", params


def _timed(run: Callable[[], object]) -> tuple[float, float]:
    """Wall-clock and CPU milliseconds of one call; on a busy machine the two drift apart."""
    started, cpu = time.perf_counter(), time.thread_time()
    run()
    return (time.perf_counter() - started) * 1000, (time.thread_time() - cpu) * 1000


def _measure(engine: Engine, database: Path, reps: int, warmup: int, like_budget_s: float) -> list[QueryTimes]:
    raw = sqlite3.connect(database)
    results: list[QueryTimes] = []
    for kind, query in QUERIES:
        times = QueryTimes(kind, query, fts_match(query.q))
        like_sql, like_params = _like_sql(query_terms(query.q))

        def search(query: EnvironmentQuery = query) -> None:
            with Session(engine) as session:
                search_environments(session, query)

        def fts(match: str = times.match) -> None:
            raw.execute(FTS_SQL, (match,)).fetchall()

        def like(sql: str = like_sql, params: list[str] = like_params) -> None:
            raw.execute(sql, params).fetchall()

        with Session(engine) as session:
            times.count = search_environments(session, query)[1]
        runs: dict[str, Callable[[], None]] = {"search": search, "fts5": fts, "like": like}
        for method in METHODS:
            for _ in range(warmup):
                runs[method]()
        like_spent = 0.0
        for _ in range(reps):
            # Interleaved, so that a slow moment of the machine hits every method alike.
            for method in METHODS:
                if method == "like" and like_spent > like_budget_s:
                    continue  # a full LIKE scan takes long; it stops early when it passes its budget
                elapsed, cpu = _timed(runs[method])
                times.samples[method].append(elapsed)
                times.cpu[method].append(cpu)
                if method == "like":
                    like_spent += elapsed / 1000
        results.append(times)
    raw.close()
    return results


def _p95(times: QueryTimes, method: str) -> float:
    return percentile(times.samples[method], 0.95)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.search", description="Search benchmark")
    parser.add_argument("--environments", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--batch", type=int, default=200, help="rows per write_environments call")
    parser.add_argument("--reps", type=int, default=30, help="timed repetitions per query and method")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        "--like-budget", type=float, default=1.5, help="seconds of LIKE scans per query before it stops repeating"
    )
    args = parser.parse_args(argv)

    began = time.perf_counter()
    print(f"machine: {machine_line()}")
    print(f"load average at start: {load_average()}")
    with tempfile.TemporaryDirectory(prefix="envhub-bench-search-") as tmp:
        database = Path(tmp) / "catalog.db"
        engine = create_db_engine(f"sqlite:///{database}")
        init_db(engine)
        started = time.perf_counter()
        writing = populate(engine, args.environments, args.seed, args.batch)
        total = time.perf_counter() - started
        engine.dispose()  # the last connection to close checkpoints and removes the WAL
        print(
            f"database: {args.environments:,} environments written in {writing:.1f} s "
            f"({args.environments / writing:,.0f} rows/s through write_environments in batches of {args.batch}; "
            f"{total:.1f} s with generating them), {database.stat().st_size / 2**20:,.0f} MiB"
        )
        engine = create_db_engine(f"sqlite:///{database}")
        results = _measure(engine, database, args.reps, args.warmup, args.like_budget)
        engine.dispose()
    print(f"load average at end: {load_average()}; the benchmark took {time.perf_counter() - began:.0f} s")

    print()
    rows: list[list[object]] = []
    for r in results:
        s, f, k = (r.samples[m] for m in METHODS)
        rows.append(
            [
                r.kind,
                r.label(),
                r.count,
                percentile(s, 0.5),
                percentile(s, 0.95),
                percentile(f, 0.5),
                percentile(f, 0.95),
                percentile(k, 0.5),
                percentile(k, 0.95),
                len(k),
                _p95(r, "search") / _p95(r, "fts5"),
            ]
        )
    headers = [
        "kind",
        "query",
        "matches",
        "search p50",
        "search p95",
        "fts5 p50",
        "fts5 p95",
        "like p50",
        "like p95",
        "like n",
        "p95 ratio",
    ]
    print("per query, milliseconds: search = search_environments (a page of 20 and the count), fts5 = the bare")
    print("FTS5 query with the same MATCH, like = a LIKE scan (repeated fewer times when one scan is slow);")
    print("p95 ratio = search p95 / fts5 p95")
    print(table(headers, rows))

    overall = {m: [t for r in results for t in r.samples[m]] for m in METHODS}
    cpu = {m: [t for r in results for t in r.cpu[m]] for m in METHODS}
    print()
    print(
        table(
            ["method", "samples", "p50 ms", "p95 ms", "max ms", "CPU p50 ms", "CPU p95 ms"],
            [
                [
                    m,
                    len(v),
                    *(percentile(v, f) for f in (0.5, 0.95)),
                    max(v),
                    *(percentile(cpu[m], f) for f in (0.5, 0.95)),
                ]
                for m, v in overall.items()
            ],
        )
    )
    print("(CPU = time the querying thread spent on a core; wall-clock minus CPU is time spent waiting for one)")
    search_p95 = percentile(overall["search"], 0.95)
    fts_p95 = percentile(overall["fts5"], 0.95)
    ratio = search_p95 / fts_p95
    slow = [r.label() for r in results if _p95(r, "search") > P95_FLOOR_MS]
    over = [r.label() for r in results if _p95(r, "search") > RATIO_FLOOR * _p95(r, "fts5")]
    checks = [
        (f"search p95 <= {P95_FLOOR_MS:g} ms", search_p95 <= P95_FLOOR_MS, f"{search_p95:.1f} ms"),
        (
            f"search p95 within {RATIO_FLOOR:g}x of bare FTS5 p95",
            ratio <= RATIO_FLOOR,
            f"{search_p95:.1f} / {fts_p95:.1f} ms = {ratio:.1f}x",
        ),
    ]
    print()
    print(table(["check", "result", "measured"], [[name, verdict(ok), got] for name, ok, got in checks]))
    print(f"{len(results) - len(slow)} of {len(results)} queries have a search p95 <= {P95_FLOOR_MS:g} ms; over it:")
    print(f"  {', '.join(slow) or 'none'}")
    print(f"{len(results) - len(over)} of {len(results)} queries are within {RATIO_FLOOR:g}x of bare FTS5 at p95; not:")
    print(f"  {', '.join(over) or 'none'}")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
