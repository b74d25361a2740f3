"""The relay's upstream WebSocket handshake: CPU per handshake of one source tree's relay against another's.

    .venv/bin/python -m bench.handshake OLD_TREE NEW_TREE [--handshakes 2000] [--rounds 3]

Each tree is a checkout (`git worktree add /tmp/old <commit>`); its relay is `gateway.relay` or, before the
gateway had a package of its own, `app.relay`. One uvicorn server answers WebSocket upgrades; for each tree in
turn a fresh process opens and closes that many upstream sockets through the tree's `open_upstream` and reports
the CPU it spent, so the two are compared side by side in one run.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.report import load_average, machine_line, table
from tests.serving import free_port

SERVER = """
async def app(scope, receive, send):
    if scope["type"] == "websocket":
        await receive()
        await send({"type": "websocket.accept"})
        while (await receive())["type"] != "websocket.disconnect":
            pass
    elif scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
"""

CLIENT = """
import asyncio, importlib, json, sys, time
try:
    relay = importlib.import_module("gateway.relay")
except ImportError:
    relay = importlib.import_module("app.relay")

async def main(url, count):
    for _ in range(50):  # warm
        leg = await relay.open_upstream(url, "ws", "", {}, 10)
        leg.abort()
    started = time.process_time()
    for _ in range(count):
        leg = await relay.open_upstream(url, "ws", "", {}, 10)
        leg.abort()
    print(json.dumps({"cpu_us": (time.process_time() - started) / count * 1e6}))

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def measure(tree: Path, url: str, count: int) -> float:
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, url, str(count)], cwd=tree, capture_output=True, text=True, check=True
    )
    return float(json.loads(done.stdout.strip().splitlines()[-1])["cpu_us"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--handshakes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "wsapp.py").write_text(SERVER)
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "wsapp:app", "--port", str(port), "--log-level", "critical"],
            cwd=scratch,
        )
        try:
            time.sleep(2)
            url = f"http://127.0.0.1:{port}"
            results: dict[str, list[float]] = {"old": [], "new": []}
            for _ in range(args.rounds):
                for name in ("old", "new"):
                    results[name].append(measure(getattr(args, name), url, args.handshakes))
        finally:
            server.terminate()
            server.wait(10)
    best = {name: min(values) for name, values in results.items()}
    print(machine_line(), f"load {load_average()}")
    rows = [[name, *(f"{v:.0f}" for v in values), f"{best[name]:.0f}"] for name, values in results.items()]
    print(table(["tree", *(f"round {i + 1} µs" for i in range(args.rounds)), "best µs"], rows))
    print(f"new / old CPU per handshake (best of each): {best['new'] / best['old']:.2f}")


if __name__ == "__main__":
    main()
