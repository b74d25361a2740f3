"""The oracle of the maze template: plays one episode to the maximum reward and prints what it got, as JSON.

Run it inside the image, beside the server (openenv's validator runs a `script` oracle in the sandbox):
`python validation/oracle.py [SEED]`.
It walks the shortest path to the exit, found by a breadth-first search of the observed grid.
"""

import json
import sys
from collections import deque
from collections.abc import Generator
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the environment's own modules
URL = "ws://127.0.0.1:8000/ws"

RESET: dict[str, Any] = {}
MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def solve(seed: int, observation: dict[str, Any]) -> Generator[dict[str, Any], dict[str, Any], None]:
    rows = observation["grid"].splitlines()
    squares = {(r, c): symbol for r, row in enumerate(rows) for c, symbol in enumerate(row)}
    start = next(square for square, symbol in squares.items() if symbol == "A")
    came: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        if squares[here] == "E":
            break
        for direction, (dr, dc) in MOVES.items():
            there = (here[0] + dr, here[1] + dc)
            if squares.get(there, "#") != "#" and there not in came:
                came[there] = (here, direction)
                queue.append(there)
    path = []
    step = came[here]
    while step is not None:
        here, direction = step
        path.append(direction)
        step = came[here]
    for direction in reversed(path):
        yield {"direction": direction}


def main() -> None:
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    rewards: list[float] = []
    with connect(URL) as ws:

        def send(kind: str, data: dict[str, Any]) -> dict[str, Any]:
            ws.send(json.dumps({"type": kind, "data": data}))
            answer = json.loads(ws.recv())
            if answer["type"] == "error":
                raise SystemExit(f"{kind} failed: {answer['data']}")
            return dict(answer["data"])

        observation = send("reset", {"seed": seed, **RESET})
        policy = solve(seed, observation["observation"])
        action = next(policy)
        while True:
            observation = send("step", action)
            rewards.append(float(observation["reward"] or 0.0))
            if observation["done"]:
                break
            action = policy.send(observation["observation"])
    print(json.dumps({"seed": seed, "reward": rewards[-1], "return": sum(rewards), "steps": len(rewards)}))


if __name__ == "__main__":
    main()
