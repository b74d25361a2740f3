"""The model door: a chat call through it against the same call straight to the model server, streamed and not.

    .venv/bin/python -m bench.modeldoor [--calls 200] [--delay-ms 50]

envhub runs as its own process (`python -m app serve`, its own data folder and SQLite catalog, no Hub, private URLs
allowed) with one endpoint (tests/environments.py's `tools`) for the agent run to name. The model is
tests/scripted_model.py in this process, answering each call after `--delay-ms`. The client is httpx: each round
times one call through the door (`<envhub>/model/v1/chat/completions` with the run's credential), one straight to
the scripted model and one through bench.bare_proxy (uvicorn and httpx passing the call on with nothing else: the
floor of the door's hop), in an order shuffled each round, after a warm-up of each; the door records every call it
passes on (just after its answer: the count is read once they are all written). Reported: the p50 of each and
their ratios to the direct call, and for streamed calls the time to the first content delta, and what each hop
adds to it.
"""

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.envhub import envhub_server
from bench.mcp import launch
from bench.report import load_average, machine_line, percentile, table, verdict
from hosting.runtimes.processes import free_port
from tests.environments import write_tools_env
from tests.scripted_model import Ask, ScriptedModel, Turn

MESSAGES = [{"role": "system", "content": "You play."}, {"role": "user", "content": "Say something."}]
ANSWER = "A few words of an answer, streamed in pieces."
WARM_UP = 10  # calls of each path and mode before the timed ones
ORDER = random.Random(37)  # each round's order of the paths: none always follows another's after-work


def timed_call(http: httpx.Client, url: str, key: str, stream: bool) -> tuple[float, float | None]:
    """Seconds to the whole answer, and (streamed) to its first content delta."""
    body = {"model": "m", "messages": MESSAGES, "stream": stream}
    started = time.perf_counter()
    first: float | None = None
    with http.stream("POST", url, json=body, headers={"authorization": f"Bearer {key}"}) as answer:
        if answer.status_code != 200:
            raise RuntimeError(f"HTTP {answer.status_code}: {answer.read()[:300]!r}")
        for line in answer.iter_lines():
            chunk = json.loads(line[6:]) if first is None and stream and line.startswith("data: {") else {}
            if chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
                first = time.perf_counter() - started
    return time.perf_counter() - started, first


def shuffled(items: list[Any]) -> list[Any]:
    ORDER.shuffle(items)
    return items


def written(envhub: str, run_id: str, calls: int, within_s: float = 60) -> int:
    """The calls of the run on record once all `calls` are (the door writes each just after its answer), or after
    `within_s`."""
    deadline = time.monotonic() + within_s
    while True:
        recorded: int = httpx.get(f"{envhub}/api/agent-runs/{run_id}").json()["run"]["calls"]
        if recorded >= calls or time.monotonic() > deadline:
            return recorded
        time.sleep(0.05)


def bare_proxy(model_url: str) -> tuple[str, "subprocess.Popen[bytes]"]:
    """bench.bare_proxy in its own process, once it answers; its URL and process."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "bench.bare_proxy", str(port), model_url])
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(url + "/v1/models")
            return url, server
        except httpx.TransportError:
            time.sleep(0.05)
    raise RuntimeError("the bare proxy did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200, help="timed calls of each path and mode")
    parser.add_argument("--delay-ms", type=float, default=50)
    args = parser.parse_args()
    delay = args.delay_ms / 1000

    def brain(_ask: Ask) -> Turn:
        return Turn(text=ANSWER, delay_s=delay)

    model = ScriptedModel(brain)
    with tempfile.TemporaryDirectory() as scratch:
        templates = Path(scratch) / "templates"
        write_tools_env(templates / "tools")
        settings = {"ENVHUB_ALLOW_PRIVATE_URLS": "true", "ENVHUB_AGENT_RUN_MAX_CALLS": "100000"}
        bare_url, bare = bare_proxy(model.url)
        with envhub_server(Path(scratch), templates, settings=settings) as (envhub, _server):
            endpoint = launch(envhub, {})
            saved = httpx.put(f"{envhub}/api/models/scripted", json={"base_url": model.url + "/v1", "model": "m"})
            saved.raise_for_status()
            started: dict[str, Any] = httpx.post(
                f"{envhub}/api/agent-runs", json={"endpoint": endpoint["id"], "preset": "scripted"}
            ).json()
            paths = {
                "door": (started["model_url"] + "/chat/completions", started["credential"]),
                "direct": (model.url + "/v1/chat/completions", "unused"),
                "bare": (bare_url + "/v1/chat/completions", "unused"),
            }
            load = load_average()
            walls: dict[tuple[str, bool], list[float]] = {}
            firsts: dict[str, list[float]] = {}
            with httpx.Client(timeout=30) as http:
                for stream in (False, True):
                    for url, key in paths.values():  # warm-up
                        for _ in range(WARM_UP):
                            timed_call(http, url, key, stream)
                    for _ in range(args.calls):
                        for name, (url, key) in shuffled(list(paths.items())):
                            wall, first = timed_call(http, url, key, stream)
                            walls.setdefault((name, stream), []).append(wall)
                            if first is not None:
                                firsts.setdefault(name, []).append(first)
            recorded = written(envhub, started["run"]["id"], 2 * (WARM_UP + args.calls))
        bare.terminate()
        bare.wait(timeout=30)
    model.close()

    rows = []
    ratios = {}
    for stream in (False, True):
        p50 = {name: percentile(walls[(name, stream)], 0.5) for name in paths}
        ratios[stream] = p50["door"] / p50["direct"]
        rows.append(
            ["streamed" if stream else "whole"]
            + [f"{p50[name] * 1000:.1f}" for name in ("direct", "bare", "door")]
            + [p50["bare"] / p50["direct"], ratios[stream]]
        )
    first_p50 = {name: percentile(firsts[name], 0.5) for name in paths}
    added_ms = (first_p50["door"] - first_p50["direct"]) * 1000
    bare_ms = (first_p50["bare"] - first_p50["direct"]) * 1000
    print(machine_line())
    print(f"load average at the start: {load}; {args.calls} timed calls of each; scripted delay {args.delay_ms:g} ms")
    print(f"calls the door recorded: {recorded}")
    print(table(["answer", "direct p50 ms", "bare p50 ms", "door p50 ms", "bare / direct", "door / direct"], rows))
    print(
        f"first content delta p50: direct {first_p50['direct'] * 1000:.1f} ms, bare {first_p50['bare'] * 1000:.1f} ms "
        f"(+{bare_ms:.1f} ms), door {first_p50['door'] * 1000:.1f} ms (+{added_ms:.1f} ms)"
    )
    print(f"- p50 through the door <= 1.1x direct, whole: {verdict(ratios[False] <= 1.1)} ({ratios[False]:.3f}x)")
    print(f"- p50 through the door <= 1.1x direct, streamed: {verdict(ratios[True] <= 1.1)} ({ratios[True]:.3f}x)")
    print(f"- first streamed delta <= direct + 5 ms: {verdict(added_ms <= 5)} (+{added_ms:.1f} ms)")


if __name__ == "__main__":
    main()
