"""The oracle of the lights out template: plays one episode to the maximum reward and prints what it got, as JSON.

Run it inside the image, beside the server (openenv's validator runs a `script` oracle in the sandbox):
`python validation/oracle.py [SEED]`.
It solves the observed board as a linear system over GF(2) and presses each light of the solution once.
"""

import json
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the environment's own modules
URL = "ws://127.0.0.1:8000/ws"

RESET: dict[str, Any] = {}


def solve(seed: int, observation: dict[str, Any]) -> Generator[dict[str, Any], dict[str, Any], None]:
    board = observation["board"]
    cells = [(r, c) for r in range(len(board)) for c in range(len(board))]
    count = len(cells)
    # One equation per light: the presses that flip it (bits 0..count-1) must flip it (bit count) when it is on.
    equations = [
        sum(1 << i for i, (pr, pc) in enumerate(cells) if abs(pr - r) + abs(pc - c) <= 1) | board[r][c] << count
        for r, c in cells
    ]
    pivots: dict[int, int] = {}
    for column in range(count):
        found = next((i for i, e in enumerate(equations) if e >> column & 1 and i not in pivots.values()), None)
        if found is None:
            continue  # a free press: left unpressed
        pivots[column] = found
        for i, equation in enumerate(equations):
            if i != found and equation >> column & 1:
                equations[i] = equation ^ equations[found]
    for column, row in pivots.items():
        if equations[row] >> count & 1:
            yield {"row": cells[column][0], "col": cells[column][1]}


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
