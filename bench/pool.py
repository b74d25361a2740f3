"""Endpoint pools: many WebSocket sessions through one pool URL, a cold pool growing under them, and a soak.

    .venv/bin/python -m bench.pool [--sessions 128] [--replicas 16] [--rounds 5] [--steps 20]
                                   [--parts warm,cold,soak,corpus] [--soak-s 60] [--keep DIR]
                                   [--rollouts 64] [--rollout-steps 5]

envhub runs as its own process (`python -m app serve`, its own data folder and SQLite
catalog, no Hub), and launches a built-in template (lights_out by default) with the
process backend, each replica told `MAX_CONCURRENT_ENVS=8`. The client is asyncio and
`websockets` in this process; every session resets and then steps a fixed number of times.

- warm: a pool launched at min = max = `--replicas`. The same work (`--sessions`
  sessions at once, each a reset and `--steps` steps) through the pool's one URL
  (gateway), and straight to each replica's own address, 8 sessions per replica
  (direct), alternating for `--rounds` rounds after one warm-up round of each.
- cold: a pool launched at min 1, max `--replicas`; once its one replica serves, all
  sessions open at once. Timed from the first connect to the last first observation;
  "hold" sessions keep their slot until every session has reset (the pool has to grow to
  hold them all), "free" ones step and close as they go.
- soak: a second envhub with `ENVHUB_WS_PING_S=--ping-s`; `--soak-concurrency` clients keep
  opening sessions for `--soak-s` seconds. A share of the sessions (`--drop`) ends
  mid-episode without a close frame: half abort the TCP connection (`transport.abort()`),
  half go silent (stop reading, leave the socket open: only the gateway's pings find
  them). Then the pool's sessions and the endpoint's active sessions must return to 0,
  and envhub's open files and RSS are read at the start, the middle and the end.
- corpus (not run by default): the official environments (shared/thirdparty/openenv-envs, copied), whose servers
  hold one session each. `--rollouts` TRL-shaped rollouts of chess_env at once (bench.trl: GRPOTrainer's
  environment_factory over the environment's typed client, each a reset from an endgame and `--rollout-steps`
  moves), through a pool of 1 to 64, then through one held at 1 to 8, where they queue; then each corpus
  environment's protocol check and quality report, and the seconds until its pool holds no session.
"""

import argparse
import asyncio
import functools
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from app.settings import REPO_ROOT
from bench import trl
from bench.instances import cpu_seconds
from bench.report import load_average, machine_line, percentile, table, verdict
from hosting.runtimes.processes import free_port
from tests.corpus import NAMES, copy_corpus

PER_REPLICA = 8  # MAX_CONCURRENT_ENVS of every replica
T = TypeVar("T")
RESET = json.dumps({"type": "reset", "data": {}})


# -- envhub and its endpoints


@dataclass
class Envhub:
    url: str
    pid: int
    log: Path
    http: httpx.Client

    def launch(
        self, template: str, least: int, most: int, timeout_s: float = 600, *, told: bool = True
    ) -> dict[str, Any]:
        """An endpoint of the template whose pool starts at `least` replicas; returned once they all serve. told: each
        replica is told MAX_CONCURRENT_ENVS=8 (the official environments hold one session whatever they are told)."""
        env = {"MAX_CONCURRENT_ENVS": str(PER_REPLICA)} if told else {}
        options = {"replicas": {"min": least, "max": most}, "env": env}
        answer = self.http.post("/api/endpoints", json={"environment": f"template:{template}", "options": options})
        answer.raise_for_status()
        endpoint_id = answer.json()["id"]
        deadline = time.monotonic() + timeout_s
        while True:
            endpoint = self.endpoint(endpoint_id)
            if endpoint["status"] not in ("starting", "running"):
                raise RuntimeError(f"launch failed: {endpoint['message']}")
            if endpoint["status"] == "running" and ready(endpoint) >= least:
                return endpoint
            if time.monotonic() > deadline:
                raise RuntimeError(f"{least} replicas did not start in {timeout_s:g} s: {endpoint['pool']}")
            time.sleep(0.1)

    def endpoint(self, endpoint_id: str) -> dict[str, Any]:
        answer = self.http.get(f"/api/endpoints/{endpoint_id}")
        answer.raise_for_status()
        endpoint: dict[str, Any] = answer.json()
        return endpoint

    def stop(self, endpoint_id: str) -> None:
        """Stop the endpoint and wait for its servers to end, so that they leave the cores to what comes next."""
        self.http.delete(f"/api/endpoints/{endpoint_id}")
        deadline = time.monotonic() + 60
        while replica_pids(endpoint_id) and time.monotonic() < deadline:
            time.sleep(0.2)

    def idle(self, endpoint_id: str, timeout_s: float) -> tuple[float, dict[str, Any]]:
        """Seconds until the pool's sessions and the endpoint's active sessions are both 0 (or the timeout)."""
        started = time.monotonic()
        while True:
            endpoint = self.endpoint(endpoint_id)
            elapsed = time.monotonic() - started
            if (endpoint["pool"]["sessions"] == 0 and endpoint["stats"]["active_sessions"] == 0) or (
                elapsed > timeout_s
            ):
                return elapsed, endpoint
            time.sleep(0.1)


def ready(endpoint: dict[str, Any]) -> int:
    return sum(r["status"] == "ready" for r in endpoint["pool"]["replicas"])


@contextmanager
def envhub(scratch: Path, name: str, replicas: int, checkout: Path = REPO_ROOT, **settings: str) -> Iterator[Envhub]:
    """`python -m app serve` from a checkout on a free port, its catalog and data in scratch/name, logging to
    scratch/name.log."""
    folder = scratch / name
    folder.mkdir(parents=True)
    port = free_port()
    servers = str(max(64, 2 * replicas))
    env = (
        {k: v for k, v in os.environ.items() if not k.startswith(("ENVHUB_", "HF_"))}
        | {
            "ENVHUB_DATABASE_URL": f"sqlite:///{folder}/envhub.db",
            "ENVHUB_DATA_DIR": str(folder / "data"),
            "ENVHUB_TEMPLATES_DIR": str(checkout / "spaces_templates"),
            "ENVHUB_SYNC_INTERVAL_S": "0",
            "ENVHUB_HEALTH_INTERVAL_S": "0",
            "ENVHUB_QUALITY_INTERVAL_S": "0",
            "ENVHUB_MAX_SERVERS": servers,
            "ENVHUB_MAX_SERVERS_PER_OWNER": servers,
            "ENVHUB_LAUNCH_TIMEOUT_S": "300",  # a pool of 64 forks at once on two cores
            "HF_ENDPOINT": "http://127.0.0.1:9",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "GRADIO_ANALYTICS_ENABLED": "False",
        }
        | {f"ENVHUB_{key.upper()}": value for key, value in settings.items()}
    )
    log = scratch / f"{name}.log"
    with log.open("wb") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--port", str(port)],
            cwd=checkout,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    http = httpx.Client(base_url=url, timeout=60)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if http.get("/api/health").is_success:
                    break
            except httpx.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"envhub did not start:\n{log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        yield Envhub(url, server.pid, log, http)
    finally:
        http.close()
        server.terminate()
        server.wait(timeout=60)


def replica_pids(endpoint_id: str) -> list[int]:
    """The endpoint's servers forked by the zygote: ps names each `env-<replica id>`, cut to 15 characters."""
    prefix = f"env-{endpoint_id}"[:15]
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError):
                if (entry / "comm").read_text().strip().startswith(prefix):
                    pids.append(int(entry.name))
    return pids


def memory_kib(pid: int, field_name: str, source: str = "status") -> int:
    """A `kB` field of /proc/<pid>/status (VmRSS) or smaps_rollup (Pss); 0 when the process is gone."""
    with suppress(OSError):
        for line in Path(f"/proc/{pid}/{source}").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return 0


def user_system(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def mem_available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return 0.0


def step_action(http: httpx.Client, endpoint_id: str) -> dict[str, Any]:
    """A valid action from the endpoint's schema: each required field at its smallest or first value."""
    schema = http.get(f"/endpoints/{endpoint_id}/schema").json()["action"]
    action: dict[str, Any] = {}
    for name in schema.get("required", []):
        spec = schema["properties"][name]
        if "enum" in spec:
            action[name] = spec["enum"][0]
        elif spec.get("type") in ("integer", "number"):
            action[name] = spec.get("minimum", 0)
        elif spec.get("type") == "boolean":
            action[name] = False
        else:
            action[name] = ""
    return action


# -- sessions


@dataclass
class Tally:
    """What a batch of sessions met."""

    sessions: int = 0
    steps: int = 0
    refused: int = 0
    errors: list[str] = field(default_factory=list)
    first: list[float] = field(default_factory=list)  # seconds from the start to each first observation
    latencies: list[float] = field(default_factory=list)  # ms per step
    aborted: int = 0
    silent: list[ClientConnection] = field(default_factory=list)  # sessions gone quiet, their sockets still open

    def error(self, what: str) -> None:
        self.errors.append(what[:300])


def ws_url(http_url: str) -> str:
    return "ws" + http_url.removeprefix("http") + "/ws"


async def _reply(ws: ClientConnection) -> str:
    reply = await ws.recv()
    return reply if isinstance(reply, str) else reply.decode()


def _kind(reply: str) -> str:
    """observation, refused (CAPACITY_REACHED) or the reply itself when it is anything else."""
    head = reply[:40]
    if '"observation"' in head:
        return "observation"
    if '"error"' in head:
        with suppress(ValueError):
            if json.loads(reply).get("data", {}).get("code") == "CAPACITY_REACHED":
                return "refused"
    return reply


async def session(
    url: str,
    step: str,
    steps: int,
    tally: Tally,
    started: float,
    *,
    hold: Callable[[], Any] | None = None,
    drop: tuple[str, int] | None = None,
) -> None:
    """One session: a reset and `steps` steps. hold: awaited after the reset; drop: (abort|silent, after steps)."""
    tally.sessions += 1
    reset_seen = dropped = False
    try:
        async with asyncio.timeout(180):
            ws = await connect(url, max_size=None, compression=None, ping_interval=None, open_timeout=60)
            try:
                with suppress(ConnectionClosed):  # refused at once: the refusal is queued to be read
                    await ws.send(RESET)
                kind = _kind(await _reply(ws))
                if kind == "refused":
                    tally.refused += 1
                    return
                if kind != "observation":
                    tally.error(f"reset answered {kind}")
                    return
                reset_seen = True
                tally.first.append(time.perf_counter() - started)
                if hold is not None:
                    await hold()
                for number in range(steps):
                    if drop is not None and number == drop[1]:
                        if drop[0] == "abort":
                            ws.transport.abort()  # the TCP connection ends without a close frame
                            tally.aborted += 1
                        else:
                            ws.transport.pause_reading()  # no more reads, so no pongs; the socket stays open
                            tally.silent.append(ws)
                        dropped = True
                        return
                    sent = time.perf_counter()
                    await ws.send(step)
                    kind = _kind(await _reply(ws))
                    tally.latencies.append((time.perf_counter() - sent) * 1000)
                    if kind != "observation":
                        tally.error(f"step answered {kind}")
                        return
                    tally.steps += 1
            finally:
                if not dropped:
                    await ws.close()
    except (ConnectionClosed, OSError, TimeoutError) as exc:
        tally.error(f"{'after' if reset_seen else 'before'} the reset: {type(exc).__name__}: {exc}")


class Barrier:
    """Released once `count` sessions have reset or given up; `held` runs (in a thread) just before."""

    def __init__(self, count: int, held: Callable[[], None] | None = None) -> None:
        self.left = count
        self.held = held
        self.event = asyncio.Event()

    async def one_done(self) -> None:
        self.left -= 1
        if self.left == 0:
            if self.held is not None:
                await asyncio.to_thread(self.held)
            self.event.set()

    async def wait(self) -> None:
        await self.one_done()
        await self.event.wait()


@dataclass
class Round:
    path: str
    tally: Tally
    wall_s: float
    cpu: dict[str, float]  # CPU seconds over the round: client, envhub, replicas

    @property
    def rate(self) -> float:
        return self.tally.steps / self.wall_s


async def _batch(
    urls: list[str], step: str, steps: int, hold: bool, held: Callable[[], None] | None
) -> tuple[Tally, float]:
    tally = Tally()
    barrier = Barrier(len(urls), held)
    started = time.perf_counter()

    async def one(url: str) -> None:
        before = len(tally.first)
        await session(url, step, steps, tally, started, hold=barrier.wait if hold else None)
        if hold and len(tally.first) == before:
            await barrier.one_done()  # it never reset: the others need not wait for it

    await asyncio.gather(*(one(url) for url in urls))
    return tally, time.perf_counter() - started


def timed_round(
    path: str,
    urls: list[str],
    step: str,
    steps: int,
    hub: Envhub,
    endpoint_id: str,
    hold: bool = False,
    held: Callable[[], None] | None = None,
) -> Round:
    """One batch of sessions at once; hold: each keeps its slot until all have reset, when `held` runs."""
    pids = replica_pids(endpoint_id)

    def now() -> tuple[float, ...]:
        return time.process_time(), *user_system(hub.pid), sum(cpu_seconds(p) for p in pids)

    before = now()
    tally, wall = asyncio.run(_batch(urls, step, steps, hold, held))
    after = now()
    names = ("client", "envhub user", "envhub system", "replicas")
    cpu = dict(zip(names, (b - a for a, b in zip(before, after, strict=True)), strict=True))
    cpu["envhub"] = cpu["envhub user"] + cpu["envhub system"]
    return Round(path, tally, wall, cpu)


# -- the figures


def warm(hub: Envhub, args: argparse.Namespace) -> tuple[list[list[object]], list[str], bool]:
    """Gateway and direct, alternating, over a pool launched at its full size."""
    sessions, replicas = args.sessions, args.replicas
    started = time.monotonic()
    endpoint = hub.launch(args.template, replicas, replicas)
    launch_s = time.monotonic() - started
    endpoint_id = endpoint["id"]
    step = json.dumps({"type": "step", "data": step_action(hub.http, endpoint_id)})
    time.sleep(3)  # the keeper's next watch: a launch it races may start more replicas than asked
    endpoint = hub.endpoint(endpoint_id)
    internal = sorted(r["internal_url"] for r in endpoint["pool"]["replicas"] if r["status"] == "ready")
    if len(internal) != replicas:
        print(f"  note: the pool has {len(internal)} ready replicas, not the {replicas} launched", flush=True)
    targets = {
        "gateway": [ws_url(endpoint["url"].replace("localhost", "127.0.0.1"))] * sessions,
        "direct": [ws_url(internal[i % len(internal)]) for i in range(sessions)],
    }
    pids = replica_pids(endpoint_id)
    rss = [memory_kib(p, "VmRSS") for p in pids]
    pss = [memory_kib(p, "Pss", "smaps_rollup") for p in pids]
    time.sleep(2)
    idle_before = cpu_seconds(hub.pid), time.monotonic()
    time.sleep(5)
    idle_cores = (cpu_seconds(hub.pid) - idle_before[0]) / (time.monotonic() - idle_before[1])
    # How the gateway spreads the sessions: each holds its slot until all have reset, and then the pool is read.
    spread: list[int] = []

    def read_spread() -> None:
        spread.extend(r["sessions"] for r in hub.endpoint(endpoint_id)["pool"]["replicas"] if r["status"] == "ready")

    held = timed_round("gateway", targets["gateway"], step, 1, hub, endpoint_id, hold=True, held=read_spread)
    hub.idle(endpoint_id, 30)
    rounds: list[Round] = []
    for number in range(args.rounds + 1):  # round 0 warms both paths up
        order = ("gateway", "direct") if number % 2 == 0 else ("direct", "gateway")
        for path in order:
            result = timed_round(path, targets[path], step, args.steps, hub, endpoint_id)
            settle_s, _ = hub.idle(endpoint_id, 30)
            if number > 0:
                rounds.append(result)
            print(
                f"  round {number} {path}: {result.rate:,.0f} steps/s, refused {result.tally.refused}, "
                f"errors {len(result.tally.errors)}, settled in {settle_s:.1f} s",
                flush=True,
            )
    endpoint = hub.endpoint(endpoint_id)
    hub.stop(endpoint_id)
    rows: list[list[object]] = []
    p50: dict[str, float] = {}
    per_session: list[str] = []
    ok = True
    for path in ("gateway", "direct"):
        mine = [r for r in rounds if r.path == path]
        rates = [r.rate for r in mine]
        p50[path] = percentile(rates, 0.5)
        refused = sum(r.tally.refused for r in mine)
        errors = sum(len(r.tally.errors) for r in mine)
        steps = sum(r.tally.steps for r in mine)
        latencies = [x for r in mine for x in r.tally.latencies]
        cpu = {k: sum(r.cpu[k] for r in mine) * 1000 / max(steps, 1) for k in mine[0].cpu}
        opened = sum(r.tally.sessions for r in mine)
        each = {k: sum(r.cpu[k] for r in mine) * 1000 / max(opened, 1) for k in ("client", "envhub", "replicas")}
        per_session.append(f"{path} {each['client']:.2f} / {each['envhub']:.2f} / {each['replicas']:.2f}")
        busy = sum(r.cpu["client"] + r.cpu["envhub"] + r.cpu["replicas"] for r in mine) / sum(r.wall_s for r in mine)
        rows.append(
            [
                f"{path} ({sessions} sessions, {replicas} replicas)",
                len(mine),
                refused,
                errors,
                min(rates),
                p50[path],
                max(rates),
                percentile(latencies, 0.5),
                percentile(latencies, 0.95),
                f"{cpu['client']:.3f} / {cpu['envhub']:.3f} / {cpu['replicas']:.3f}",
                f"{cpu['envhub user']:.3f} / {cpu['envhub system']:.3f}",
                round(busy, 2),
            ]
        )
        ok &= refused == 0 and errors == 0
        for error in sorted({e for r in mine for e in r.tally.errors})[:5]:
            print(f"  {path} error: {error}")
    ratio = p50["gateway"] / p50["direct"]
    gateway_rates = [r.rate for r in rounds if r.path == "gateway"]
    direct_rates = [r.rate for r in rounds if r.path == "direct"]
    paired = sorted(g / d for g, d in zip(gateway_rates, direct_rates, strict=True))
    notes = [
        f"launch of {replicas} replicas at once: {launch_s:.1f} s; replicas' RSS {sum(rss) / 1024:,.0f} MiB "
        f"({sum(rss) / 1024 / max(len(rss), 1):.0f} each), PSS {sum(pss) / 1024:,.0f} MiB "
        f"({sum(pss) / 1024 / max(len(pss), 1):.0f} each); MemAvailable after launch {mem_available_mib():,.0f} MiB",
        f"{len(pids)} replica processes, {len(internal)} ready replicas; "
        f"envhub's CPU while the pool is idle: {idle_cores:.3f} cores",
        f"all {sessions} sessions held at once through the gateway: {len(held.tally.first)} reset, refused "
        f"{held.tally.refused}, errors {len(held.tally.errors)}; sessions per replica min {min(spread, default=0)}, "
        f"max {max(spread, default=0)} over {len(spread)} replicas",
        f"CPU ms per session (a reset and {args.steps} steps) client / envhub / replicas: " + "; ".join(per_session),
        "gateway / direct within each round: " + ", ".join(f"{x:.2f}" for x in paired),
        f"gateway / direct at p50: {ratio:.2f} ({verdict(ratio >= 0.9)}, floor 0.9); refused and errors "
        f"through the gateway: {rows[0][2]} and {rows[0][3]} ({verdict(rows[0][2] == 0 and rows[0][3] == 0)}, floor 0)",
        f"pool at the end: {endpoint['pool']['sessions']} sessions; last events: "
        + ("; ".join(e["message"] for e in endpoint["pool"]["events"][:3]) or "none"),
    ]
    return rows, notes, ok and ratio >= 0.9


def cold(hub: Envhub, args: argparse.Namespace, hold: bool) -> tuple[list[object], list[str], bool]:
    """A pool launched at one replica, then every session at once."""
    endpoint = hub.launch(args.template, 1, args.replicas)
    endpoint_id = endpoint["id"]
    step = json.dumps({"type": "step", "data": step_action(hub.http, endpoint_id)})
    url = ws_url(endpoint["url"].replace("localhost", "127.0.0.1"))
    seen: list[tuple[float, int, int, int]] = []  # (s, ready replicas, sessions, waiting)
    reads: list[float] = []  # seconds each GET /api/endpoints/{id} took
    stop_watching = False
    started = time.perf_counter()

    def watch() -> None:
        with httpx.Client(base_url=hub.url, timeout=30) as http:
            while not stop_watching:
                asked = time.perf_counter()
                pool = http.get(f"/api/endpoints/{endpoint_id}").json()["pool"]
                reads.append(time.perf_counter() - asked)
                live = sum(r["status"] == "ready" for r in pool["replicas"])
                seen.append((time.perf_counter() - started, live, pool["sessions"], pool["waiting"]))
                time.sleep(0.25)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    result = timed_round("gateway", [url] * args.sessions, step, args.steps, hub, endpoint_id, hold=hold)
    stop_watching = True
    watcher.join()
    endpoint = hub.endpoint(endpoint_id)
    hub.stop(endpoint_id)
    tally = result.tally
    all_reset = max(tally.first) if tally.first else math.inf
    most = max((s[1] for s in seen), default=0)
    full_at = next((s[0] for s in seen if s[1] >= most), math.nan)
    waiting = max((s[3] for s in seen), default=0)
    kind = "hold" if hold else "free"
    row: list[object] = [
        f"{kind}: {args.sessions} sessions, min 1 max {args.replicas}",
        len(tally.first),
        tally.refused,
        len(tally.errors),
        percentile(tally.first, 0.5) if tally.first else math.nan,
        all_reset,
        result.wall_s,
        most,
        full_at,
        waiting,
    ]
    readings = ", ".join(f"{at:.1f} s: {live}" for at, live, _, _ in seen[:: max(1, len(seen) // 8)])
    notes = [
        f"{kind}: ready replicas as read {len(seen)} times ({readings}); each GET /api/endpoints/<id> took "
        f"{min(reads, default=0):.2f}-{max(reads, default=0):.2f} s"
    ]
    notes += [f"{kind} error: {e}" for e in sorted(set(tally.errors))[:5]]
    return row, notes, all_reset <= 10 and tally.refused == 0 and not tally.errors


def soak(hub: Envhub, args: argparse.Namespace) -> tuple[list[list[object]], list[str], bool]:
    """Sessions opened without pause, some dropped mid-episode; then everything they held must be let go."""
    replicas = args.soak_replicas
    endpoint = hub.launch(args.template, replicas, replicas)
    endpoint_id = endpoint["id"]
    step = json.dumps({"type": "step", "data": step_action(hub.http, endpoint_id)})
    url = ws_url(endpoint["url"].replace("localhost", "127.0.0.1"))
    # Warm-up: one full-concurrency batch, so that what envhub allocates once is in the first sample.
    timed_round("gateway", [url] * args.soak_concurrency, step, args.steps, hub, endpoint_id)
    hub.idle(endpoint_id, 30)
    samples: list[tuple[str, float, int, int]] = []  # (when, s, fds, RSS KiB)

    def sample(when: str, at: float) -> None:
        samples.append((when, at, open_files(hub.pid), memory_kib(hub.pid, "VmRSS")))

    sample("start", 0.0)
    tally = Tally()
    rng = random.Random(7)

    async def run() -> tuple[float, float, int]:
        """Seconds of load, seconds until the sessions were let go after it, and how many were not."""
        started = time.perf_counter()
        deadline = started + args.soak_s
        drops = 0

        async def client() -> None:
            nonlocal drops
            while time.perf_counter() < deadline:
                drop = None
                if rng.random() < args.drop:
                    drops += 1
                    drop = ("abort" if drops % 2 else "silent", rng.randrange(1, args.steps))
                await session(url, step, args.steps, tally, started, drop=drop)

        async def sampler() -> None:
            every = args.soak_s / 6
            for number in range(1, 6):
                await asyncio.sleep(max(0.0, started + number * every - time.perf_counter()))
                await asyncio.to_thread(sample, "middle" if number == 3 else "under load", number * every)

        await asyncio.gather(sampler(), *(client() for _ in range(args.soak_concurrency)))
        load_s = time.perf_counter() - started
        # The silent sockets stay open while the gateway's pings find them.
        settle_s, final = await asyncio.to_thread(hub.idle, endpoint_id, 6 * args.ping_s + 10)
        sample("end", time.perf_counter() - started)
        for ws in tally.silent:
            ws.transport.abort()
        return load_s, settle_s, final["pool"]["sessions"] + final["stats"]["active_sessions"]

    before_cpu = cpu_seconds(hub.pid)
    wall, settle_s, lost_at_end = asyncio.run(run())
    envhub_cpu = cpu_seconds(hub.pid) - before_cpu
    endpoint = hub.endpoint(endpoint_id)
    # What the replicas still hold: every slot of the pool at once, through the gateway, holding until all reset.
    check = timed_round("gateway", [url] * (replicas * PER_REPLICA), step, 1, hub, endpoint_id, hold=True)
    hub.stop(endpoint_id)
    silent = len(tally.silent)
    rows: list[list[object]] = [[when, round(at, 1), fds, round(rss / 1024, 1)] for when, at, fds, rss in samples]
    flat = abs(samples[-1][2] - samples[0][2]) <= 5
    notes = [
        f"{tally.sessions:,} sessions in {args.soak_s:g} s at {args.soak_concurrency} at once on {replicas} replicas: "
        f"{tally.steps:,} steps, {tally.aborted} aborted (no close frame), {silent} gone silent, "
        f"refused {tally.refused}, errors {len(tally.errors)}; envhub CPU {envhub_cpu:.1f} s in {wall:.1f} s",
        f"after the last client: pool sessions + active sessions = {lost_at_end} after {settle_s:.1f} s "
        f"({verdict(lost_at_end == 0)}, floor 0, waited up to {6 * args.ping_s + 10:g} s, ping {args.ping_s:g} s); "
        f"pool sessions {endpoint['pool']['sessions']}, stats.active_sessions {endpoint['stats']['active_sessions']}",
        f"open files start/end {samples[0][2]}/{samples[-1][2]} ({verdict(flat)}); "
        f"RSS start/end {samples[0][3] / 1024:.1f}/{samples[-1][3] / 1024:.1f} MiB",
        f"then every slot at once ({replicas * PER_REPLICA} sessions, holding): "
        f"{len(check.tally.first)} reset, refused {check.tally.refused}, errors {len(check.tally.errors)}, "
        f"all reset in {max(check.tally.first, default=math.nan):.2f} s",
    ]
    notes += [f"soak error: {e}" for e in sorted(set(tally.errors))[:8]]
    return rows, notes, lost_at_end == 0 and flat and not tally.errors and tally.refused == 0


def most_ready(hub: Envhub, endpoint_id: str, work: Callable[[], T]) -> tuple[T, int]:
    """What work returns, and the most ready replicas the endpoint's pool had while it ran (read every 0.5 s)."""
    peak = 0
    finished = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not finished.wait(0.5):
            peak = max(peak, ready(hub.endpoint(endpoint_id)))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        return work(), max(peak, ready(hub.endpoint(endpoint_id)))
    finally:
        finished.set()
        watcher.join()


def corpus(hub: Envhub, args: argparse.Namespace, python: Path, scratch: Path) -> tuple[list[str], bool]:
    """The official environments: TRL-shaped rollouts of chess_env through a pool of 1 to 64 and one held at 1 to 8
    (its servers hold one session each), then every corpus environment's protocol check and quality report, and how
    soon its pool lets their sessions go."""
    rows: list[list[object]] = []
    notes: list[str] = []
    ok = True
    for most in (64, 8):
        endpoint = hub.launch("chess_env", 1, most, told=False)
        batch = functools.partial(
            trl.rollouts, python, scratch, "chess_env", endpoint["url"], args.rollouts, args.rollout_steps
        )
        done, peak = most_ready(hub, endpoint["id"], batch)
        complete = done.complete(args.rollout_steps)
        rows.append(
            [
                f"chess_env, {args.rollouts} rollouts, pool {{1, {most}}}",
                complete,
                done.refused(),
                len(done.errors),
                done.keepalive(),
                done.seconds(0.5),
                done.seconds(1.0),
                done.wall_s,
                peak,
            ]
        )
        notes += [f"pool {{1, {most}}} error: {e.strip().splitlines()[-1][:200]}" for e in sorted(set(done.errors))[:5]]
        ok &= complete == args.rollouts and not done.errors
        hub.stop(endpoint["id"])
        print(
            f"  corpus: pool {{1, {most}}}: {complete} of {args.rollouts} complete in {done.wall_s:.1f} s", flush=True
        )
    checked: list[list[object]] = []
    for name in NAMES:
        endpoint = hub.launch(name, 1, 1, told=False)
        for suite in ("protocol", "quality"):
            outcome, waited, left = trl.released(hub.http, endpoint["id"], suite)
            checked.append([name, suite, outcome, round(waited, 2), left])
            ok &= left == 0 and waited <= 2
        hub.stop(endpoint["id"])
    headers = ["TRL-shaped rollouts", "complete", "refused", "errors", "keepalive deaths", "rollout p50 s"]
    headers += ["rollout max s", "wall s", "ready replicas at most"]
    results = [table(headers, rows), *notes, "(floor: every rollout complete; 0 refused, 0 errors)", ""]
    results += [table(["corpus environment", "suite", "verdict", "s to 0 sessions", "sessions then"], checked)]
    results += ["(floor: the pool holds 0 sessions within 2 s of every check)", ""]
    return results, ok


def log_summary(log: Path) -> list[str]:
    """How many tracebacks envhub logged, by the exception that ended each."""
    lines = log.read_text(errors="replace").splitlines()
    ends: dict[str, int] = {}
    for number, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            end = next((x for x in lines[number + 1 :] if x and not x.startswith((" ", "Traceback"))), "?")
            if end.startswith(("During handling", "The above exception")):
                continue
            ends[end[:160]] = ends.get(end[:160], 0) + 1
    total = sum(ends.values())
    return [f"envhub log: {total} tracebacks ({log})", *(f"  {n} x {end}" for end, n in sorted(ends.items()))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=128)
    parser.add_argument("--replicas", type=int, help=f"default: sessions / {PER_REPLICA}")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--template", default="lights_out")
    parser.add_argument("--parts", default="warm,cold,soak")
    parser.add_argument("--cold-rounds", type=int, default=1)
    parser.add_argument("--soak-s", type=float, default=60)
    parser.add_argument("--soak-concurrency", type=int, default=64)
    parser.add_argument("--soak-replicas", type=int, default=10)
    parser.add_argument("--drop", type=float, default=0.2, help="share of soak sessions that end without a close")
    parser.add_argument("--ping-s", type=float, default=2, help="ENVHUB_WS_PING_S of the soak's envhub")
    parser.add_argument(
        "--checkout", type=Path, default=REPO_ROOT, help="the envhub to serve (default: this one); `git archive` one"
    )
    parser.add_argument("--keep", type=Path, help="keep envhub's logs and data here (default: a temporary folder)")
    parser.add_argument("--rollouts", type=int, default=64, help="the corpus part's TRL-shaped rollouts at once")
    parser.add_argument("--rollout-steps", type=int, default=5, help="tool calls of each rollout after its reset")
    args = parser.parse_args()
    args.replicas = args.replicas or math.ceil(args.sessions / PER_REPLICA)
    parts = set(args.parts.split(","))
    print(machine_line())
    print(f"kernel {os.uname().release}; envhub from {args.checkout}", flush=True)
    print(f"load average before: {load_average()}", flush=True)
    results: list[str] = []
    passed = True
    with tempfile.TemporaryDirectory(prefix="envhub-bench-") as temporary:
        scratch = args.keep or Path(temporary)
        scratch.mkdir(parents=True, exist_ok=True)
        if parts & {"warm", "cold"}:
            with envhub(scratch, "pools", args.replicas, args.checkout.resolve()) as hub:
                if "warm" in parts:
                    rows, notes, ok = warm(hub, args)
                    headers = ["warm pool", "rounds", "refused", "errors", "min steps/s", "p50 steps/s"]
                    headers += ["max steps/s", "step p50 ms", "step p95 ms", "CPU ms/step client/envhub/replicas"]
                    headers += ["envhub user/system", "cores busy"]
                    results += [table(headers, rows), *notes, ""]
                    passed &= ok
                if "cold" in parts:
                    cold_rows: list[list[object]] = []
                    cold_notes: list[str] = []
                    for _ in range(args.cold_rounds):
                        for hold in (True, False):
                            row, notes, ok = cold(hub, args, hold)
                            cold_rows.append(row)
                            cold_notes += notes
                            passed &= ok
                            print(f"  cold {row[0]}: all reset in {row[5]:.2f} s", flush=True)
                    headers = ["cold pool", "reset", "refused", "errors", "first obs p50 s", "all reset s"]
                    headers += ["wall s", "replicas at most", "at most by s", "most waiting"]
                    results += [table(headers, cold_rows), *cold_notes, "(floor: all reset ≤ 10 s, refused 0)", ""]
                results += log_summary(hub.log)
        if "soak" in parts:
            checkout = args.checkout.resolve()
            with envhub(scratch, "soak", args.soak_replicas, checkout, ws_ping_s=str(args.ping_s)) as hub:
                rows, notes, ok = soak(hub, args)
                passed &= ok
                results += [table(["soak sample", "s", "open files", "RSS MiB"], rows), *notes]
                results += log_summary(hub.log)
        if "corpus" in parts:
            checkout = args.checkout.resolve()
            with ExitStack() as stack:
                python = trl.clients(scratch, stack)
                extra = copy_corpus(scratch / "corpus-envs")
                with envhub(scratch, "corpus", 64, checkout, extra_templates=str(extra)) as hub:
                    rows_notes, ok = corpus(hub, args, python, scratch)
                    passed &= ok
                    results += [*rows_notes, *log_summary(hub.log)]
        print(f"load average after: {load_average()}")
        print("\n".join(results))
        if args.keep is None and not passed:
            print("(rerun with --keep DIR to keep envhub's logs)")


if __name__ == "__main__":
    main()
