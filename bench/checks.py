"""A full conformance check of one endpoint, and one health round over 500 local endpoints.

    .venv/bin/python -m bench.checks [--repeat 5] [--endpoints 500]

Checks: each built-in template is launched by envhub (process backend) and checked
through its gateway URL, as `POST /api/checks {"endpoint": ...}` does; the counting
environment is also checked directly, without the gateway.

Monitor: a child process serves openenv's counting app on 500 loopback ports (one real
openenv server, 500 sockets), each registered as an environment by URL; the monitor
then probes all of them with bounded concurrency. The first round also reads each
environment's /metadata, /schema, MCP tools and Task API splits; later rounds send
/health and one reset.
"""

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlmodel import Session

from bench.report import load_average, machine_line, percentile, table, verdict
from catalog.hub import HubClient
from catalog.models import Environment, Source
from conformance import check_url
from core.db import create_db_engine, init_db
from core.leases import Leases
from core.outbound import OutboundGuard
from hosting.assembly import build_hosting
from hosting.limits import EndpointLimits
from hosting.monitor import HealthMonitor

CHECK_FLOOR_S = 3.0
ROUND_FLOOR_S = 60.0
TEMPLATES = ("toolbox", "arithmetic_tasks", "connect_four", "wordle", "maze", "lights_out")
LOCAL = OutboundGuard(allow_private=True)


def serve_ports(count: int) -> None:
    """Child process: the counting app on `count` loopback sockets; prints the ports, serves until killed."""
    import uvicorn

    from tests.checkservers import count_app

    sockets = []
    for _ in range(count):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        sockets.append(sock)
    print(json.dumps([s.getsockname()[1] for s in sockets]), flush=True)
    config = uvicorn.Config(count_app(max_sessions=64), log_level="critical", backlog=2048)
    uvicorn.Server(config).run(sockets=sockets)


def time_checks(url: str, repeat: int) -> tuple[list[float], bool]:
    times, conforms = [], True
    for _ in range(repeat):
        started = time.perf_counter()
        report = asyncio.run(check_url(url, LOCAL))
        times.append(time.perf_counter() - started)
        conforms = conforms and report.conforms
    return times, conforms


def bench_checks(repeat: int) -> list[list[object]]:
    from tests.checkservers import count_app, serve
    from tests.serving import serve_templates

    rows: list[list[object]] = []
    with serve(count_app()) as served:
        asyncio.run(check_url(served.url, LOCAL))  # warm up imports and the server
        times, conforms = time_checks(served.url, repeat)
        rows.append(["count (direct)", repeat, percentile(times, 0.5), max(times), "yes" if conforms else "NO"])
    with serve_templates(*TEMPLATES) as urls:
        for name in TEMPLATES:
            times, conforms = time_checks(urls[name], repeat)
            rows.append([f"{name} (gateway)", repeat, percentile(times, 0.5), max(times), "yes" if conforms else "NO"])
    return rows


def bench_monitor(endpoints: int, concurrency: list[int]) -> list[list[object]]:
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.checks", "--serve-ports", str(endpoints)],
        stdout=subprocess.PIPE,
        text=True,
    )
    rows: list[list[object]] = []
    try:
        assert child.stdout is not None
        ports = json.loads(child.stdout.readline())
        time.sleep(1)  # uvicorn starts serving the sockets
        for limit in concurrency:
            with tempfile.TemporaryDirectory(prefix="envhub-bench-") as scratch:
                engine = create_db_engine(f"sqlite:///{scratch}/envhub.db")
                init_db(engine)
                with Session(engine) as session:
                    for port in ports:
                        host = f"http://127.0.0.1:{port}"
                        session.add(
                            Environment(id=f"url:127.0.0.1:{port}", source=Source.URL, title="count", host=host)
                        )
                    session.commit()
                leases = Leases(engine)
                manager = build_hosting(engine, {}, Path(scratch) / "endpoints", EndpointLimits(), leases).endpoints
                monitor = HealthMonitor(
                    engine, HubClient("http://127.0.0.1:9"), manager, leases, LOCAL, concurrency=limit, timeout_s=5
                )
                for label in ("first (reads the interface)", "next (health + reset)"):
                    done = asyncio.run(monitor.run_round())
                    up = done.statuses.get("up", 0)
                    rows.append([limit, label, done.probed, up, done.seconds, verdict(done.seconds <= ROUND_FLOOR_S)])
                engine.dispose()
    finally:
        child.kill()
        child.wait()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5, help="checks per endpoint")
    parser.add_argument("--endpoints", type=int, default=500)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[16, 64])
    parser.add_argument("--serve-ports", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_ports:
        serve_ports(args.serve_ports)
        return
    print(f"machine: {machine_line()}; load {load_average()}\n")
    checks = bench_checks(args.repeat)
    worst = max(float(str(row[3])) for row in checks)
    print("One full check (every checklist item, one short episode), seconds:\n")
    print(table(["endpoint", "runs", "p50 s", "max s", "conforms"], checks))
    print(
        f"\nfloor: one check <= {CHECK_FLOOR_S:g} s for a healthy local endpoint: {verdict(worst <= CHECK_FLOOR_S)}\n"
    )
    rounds = bench_monitor(args.endpoints, args.concurrency)
    print(f"Monitor rounds over {args.endpoints} local endpoints:\n")
    print(table(["concurrency", "round", "probed", "up", "seconds", f"<= {ROUND_FLOOR_S:g} s"], rounds))
    print(f"\nload after: {load_average()}")


if __name__ == "__main__":
    main()
