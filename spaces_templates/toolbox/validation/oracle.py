"""The oracle of the toolbox template: plays one episode to the maximum reward and prints what it got, as JSON.

Run it inside the image, beside the server (openenv's validator runs a `script` oracle in the sandbox):
`python validation/oracle.py [SEED]`.
It submits the answer of the task the server drew, from the task bank, with the submit_answer tool.
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
    from server.tasks import TASKS_BY_ID

    answer = TASKS_BY_ID[observation["task_id"]].answer
    yield {"type": "call_tool", "tool_name": "submit_answer", "arguments": {"answer": answer}}


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
