"""The MCP door: a tools/call round trip through it against OpenEnv's own /mcp on the same server, and many MCP
sessions at once through a pool.

    .venv/bin/python -m bench.mcp [--calls 2000] [--sessions 64] [--replicas 4]

envhub runs as its own process (`python -m app serve`, its own data folder and SQLite catalog, no Hub) and launches
a small MCP environment (tests/environments.py's `tools`: one tool, episodes without end) with the process backend.
The client is httpx in this process, speaking the transport's JSON: a session is initialized, then `calculate` is
called over and over.

- latency: one replica. The same call (`calculate` of "6 * 7") is timed alternately through the door
  (`POST <gateway>/mcp`, tools/call with the Mcp-Session-Id) and straight to the replica's own `/mcp` (OpenEnv's
  JSON-RPC, tools/call in an `openenv/session/create` session), after a warm-up of each; the p50 of each and
  their ratio.
- sessions: a pool of `--replicas` replicas of `--sessions / --replicas` sessions each; all sessions initialize
  at once, list the tools, call a few and end. Refused (the pool full) and failed sessions are counted.
"""

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from bench.envhub import envhub_process
from bench.report import load_average, machine_line, percentile, table, verdict
from tests.environments import write_tools_env

JSON = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
CALL = {"name": "calculate", "arguments": {"expression": "6 * 7"}}  # 42


def launch(envhub: str, options: dict[str, Any]) -> dict[str, Any]:
    endpoint: dict[str, Any] = httpx.post(
        f"{envhub}/api/endpoints", json={"environment": "template:tools", "options": options}, timeout=60
    ).json()
    while endpoint["status"] == "starting":
        time.sleep(0.1)
        endpoint = httpx.get(f"{envhub}/api/endpoints/{endpoint['id']}", timeout=30).json()
    if endpoint["status"] != "running":
        raise RuntimeError(f"launch failed: {endpoint['message']}")
    return endpoint


def rpc(method: str, params: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


async def initialize(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    """A door session's headers, once initialized (the client's `initialized` notification sent)."""
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
    opened = await http.post(url, json=rpc("initialize", params), headers=JSON)
    answer = opened.json()
    if "error" in answer:
        raise RuntimeError(answer["error"]["message"])
    headers = JSON | {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


async def timed(call: Callable[[], Awaitable[httpx.Response]], samples: list[float]) -> None:
    started = time.perf_counter()
    answer = (await call()).json()
    samples.append((time.perf_counter() - started) * 1000)
    result = answer.get("result") or {}
    text = json.dumps(result)
    if "error" in answer or result.get("isError") or "42" not in text:
        raise RuntimeError(f"unexpected answer: {text[:300]}")


async def latency(endpoint: dict[str, Any], calls: int) -> dict[str, list[float]]:
    door, direct = f"{endpoint['url']}/mcp", f"{endpoint['internal_url']}/mcp"
    samples: dict[str, list[float]] = {"door": [], "direct": []}
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await initialize(http, door)
        created = (await http.post(direct, json=rpc("openenv/session/create", {}))).json()
        session_id = created["result"]["session_id"]
        direct_call = rpc("tools/call", CALL | {"session_id": session_id})

        def through_door() -> Awaitable[httpx.Response]:
            return http.post(door, json=rpc("tools/call", CALL), headers=headers)

        def straight() -> Awaitable[httpx.Response]:
            return http.post(direct, json=direct_call)

        for _ in range(50):  # warm-up
            await timed(through_door, [])
            await timed(straight, [])
        for _ in range(calls):  # alternating, so that the machine's load weighs on both alike
            await timed(through_door, samples["door"])
            await timed(straight, samples["direct"])
        await http.delete(door, headers=headers)
        await http.post(direct, json=rpc("openenv/session/close", {"session_id": session_id}))
    return samples


async def sessions_at_once(endpoint: dict[str, Any], sessions: int) -> tuple[int, int, list[float], float]:
    """Every session opens at once, lists the tools, makes a few calls, and ends: refused, failed, call times."""
    url = f"{endpoint['url']}/mcp"
    refused = failed = 0
    samples: list[float] = []

    async def one(http: httpx.AsyncClient) -> None:
        nonlocal refused, failed
        try:
            headers = await initialize(http, url)
        except RuntimeError as exc:
            if "pool is full" in str(exc):
                refused += 1
            else:
                failed += 1
            return
        try:
            listed = (await http.post(url, json=rpc("tools/list", {}), headers=headers)).json()
            if [t["name"] for t in listed["result"]["tools"]] != ["calculate"]:
                raise RuntimeError(f"tools/list answered {listed}")
            for _ in range(5):
                await timed(lambda: http.post(url, json=rpc("tools/call", CALL), headers=headers), samples)
        except (RuntimeError, KeyError, httpx.HTTPError):
            failed += 1
        finally:
            await http.delete(url, headers=headers)

    limits = httpx.Limits(max_connections=sessions * 2, max_keepalive_connections=sessions * 2)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        started = time.perf_counter()
        await asyncio.gather(*(one(http) for _ in range(sessions)))
        wall = time.perf_counter() - started
    return refused, failed, samples, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--replicas", type=int, default=4)
    args = parser.parse_args()
    print(machine_line())
    print(f"load average before: {load_average()}")
    with tempfile.TemporaryDirectory(prefix="envhub-bench-") as scratch:
        templates = Path(scratch) / "templates"
        write_tools_env(templates / "tools")
        with envhub_process(Path(scratch), templates) as envhub:
            one = launch(envhub, {"replicas": 1})
            samples = asyncio.run(latency(one, args.calls))
            per_replica = -(-args.sessions // args.replicas)
            pool = launch(envhub, {"replicas": args.replicas, "env": {"MAX_CONCURRENT_ENVS": str(per_replica)}})
            refused, failed, calls, wall = asyncio.run(sessions_at_once(pool, args.sessions))
    door, direct = (percentile(samples[k], 0.5) for k in ("door", "direct"))
    rows = [[k, len(v), percentile(v, 0.5), percentile(v, 0.95)] for k, v in samples.items()]
    print(table(["tools/call", "calls", "p50 ms", "p95 ms"], rows))
    ratio = door / direct
    print(f"door / direct at p50: {ratio:.2f}x ({verdict(ratio <= 1.2)}, floor 1.2x)")
    headers = ["sessions at once", "replicas", "refused", "failed", "calls", "call p50 ms", "call p95 ms", "wall s"]
    figures = [args.sessions, args.replicas, refused, failed, len(calls)]
    print(table(headers, [[*figures, percentile(calls, 0.5), percentile(calls, 0.95), wall]]))
    print(f"{args.sessions} sessions at once: {refused} refused, {failed} failed ({verdict(refused == failed == 0)})")
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
