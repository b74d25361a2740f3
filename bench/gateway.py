"""Steps per second and step latency directly against an endpoint and through the gateway.

    .venv/bin/python -m bench.gateway [--seconds 5]

One process endpoint of a small counting environment; each session resets once and then
steps as fast as it can over the WebSocket protocol, for a fixed time, first with one
session and then with sixteen, against the endpoint's own address and the gateway's.
"""

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import httpx
from websockets.asyncio.client import connect

from bench.envhub import envhub_process
from bench.report import load_average, machine_line, percentile, table, verdict
from tests.environments import write_count_env

STEP = json.dumps({"type": "step", "data": {"add": 0}})


async def session(url: str, seconds: float, latencies: list[float]) -> int:
    ws_url = "ws" + url.removeprefix("http") + "/ws"
    async with connect(ws_url, max_size=None, compression=None) as ws:
        await ws.send(json.dumps({"type": "reset", "data": {}}))
        await ws.recv()
        steps, deadline = 0, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await ws.send(STEP)
            reply = await ws.recv()
            latencies.append((time.perf_counter() - started) * 1000)
            if '"observation"' not in str(reply)[:40]:
                raise RuntimeError(f"unexpected reply: {reply!r:.200}")
            steps += 1
        return steps


async def measure(url: str, sessions: int, seconds: float) -> tuple[float, float, float]:
    latencies: list[float] = []
    counts = await asyncio.gather(*(session(url, seconds, latencies) for _ in range(sessions)))
    return sum(counts) / seconds, percentile(latencies, 0.5), percentile(latencies, 0.95)


def launch(envhub: str) -> dict[str, str]:
    endpoint = httpx.post(f"{envhub}/api/endpoints", json={"environment": "template:count"}).json()
    while endpoint["status"] == "starting":
        time.sleep(0.05)
        endpoint = httpx.get(f"{envhub}/api/endpoints/{endpoint['id']}").json()
    if endpoint["status"] != "running":
        raise RuntimeError(f"launch failed: {endpoint['message']}")
    return {"direct": endpoint["internal_url"], "gateway": endpoint["url"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5)
    args = parser.parse_args()
    results: dict[tuple[str, int], tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="envhub-bench-") as scratch:
        templates = Path(scratch) / "templates"
        write_count_env(templates / "count")
        with envhub_process(Path(scratch), templates) as envhub:
            targets = launch(envhub)
            for sessions in (1, 16):
                for name, url in targets.items():
                    asyncio.run(measure(url, sessions, 0.5))  # warm up connections and code paths
                    results[name, sessions] = asyncio.run(measure(url, sessions, args.seconds))
    rows = [[name, sessions, *figures] for (name, sessions), figures in results.items()]
    ratio = results["gateway", 16][0] / results["direct", 16][0]
    added_p50 = results["gateway", 1][1] - results["direct", 1][1]
    print(machine_line())
    print(f"load average before: {load_average()}")
    print(table(["path", "sessions", "steps/s", "p50 ms", "p95 ms"], rows))
    print(f"gateway throughput at 16 sessions: {ratio:.0%} of direct ({verdict(ratio >= 0.8)}, floor 80 %)")
    print(f"added p50 latency at 1 session: {added_p50:.3f} ms ({verdict(added_p50 <= 0.5)}, floor 0.5 ms)")


if __name__ == "__main__":
    main()
