"""Run in a throwaway virtualenv where corpus environments' packages are installed (tests/corpus.py): their typed
clients, found by openenv's AutoEnv, and TRL's environment_factory pattern over them. Imports openenv and the standard
library only. Its one argument is JSON; it prints one JSON line of what happened.

    {"mode": "autoenv", "urls": {name: url}}: AutoEnv.from_env(name, base_url=url), a reset and a step, for each;
    {"mode": "trl", "name": ..., "url": ..., "rollouts": 64, "steps": 5}: GRPOTrainer's way with an
        environment_factory: one instance of a class wrapping the typed client per rollout, made one after another
        (as the trainer does when it starts; each connects at its first reset), then every rollout's reset and
        steps at once (each on a thread of its own), the model's tool calls played by the first legal move.
"""

import json
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from openenv import AutoAction, AutoEnv

ENDGAME = "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"  # chess's engine answers at once with so few pieces
RESET: dict[str, dict[str, Any]] = {"chess_env": {"fen": ENDGAME}}


def legal(name: str, observation: Any) -> dict[str, Any]:
    """A move the environment takes now, read from its typed observation."""
    if name == "chess_env":
        return {"move": observation.legal_moves[0]}
    if name == "connect4_env":
        return {"column": observation.legal_actions[0]}
    if name == "maze_env":
        return {"action": observation.legal_actions[0]}
    return {"action": 0}


def typed(urls: dict[str, str]) -> dict[str, Any]:
    """Each environment's typed client: its class, its observation's class, a reset and a step."""
    seen = {}
    for name, url in urls.items():
        action = AutoAction.from_env(name)
        client = AutoEnv.from_env(name, base_url=url)
        with client.sync() as session:
            reset = session.reset(**RESET.get(name, {}))
            step = session.step(action(**legal(name, reset.observation)))
        seen[name] = {
            "client": f"{type(client).__module__}.{type(client).__name__}",
            "observation": type(step.observation).__name__,
            "action": action.__name__,
            "reward": step.reward,
        }
    return seen


def factory(name: str, url: str) -> type:
    """The class a trainer hands GRPOTrainer as environment_factory: each instance is one rollout's environment, its
    public methods the model's tools."""
    action = AutoAction.from_env(name)

    class Rollout:
        def __init__(self) -> None:
            self.client = AutoEnv.from_env(name, base_url=url).sync()  # it connects at its first reset
            self.observation: Any = None
            self.reward = 0.0
            self.done = False

        def reset(self, **kwargs: Any) -> str:
            result = self.client.reset(**RESET.get(name, {}))
            self.observation, self.reward, self.done = result.observation, 0.0, result.done
            return str(self.observation)

        def play(self, move: dict[str, Any]) -> str:
            """Make a move.

            Args:
                move: the action's fields, as the environment's schema names them.

            Returns:
                The observation after the move.
            """
            if self.done:
                raise ValueError("The game is over.")
            result = self.client.step(action(**move))
            self.observation, self.done = result.observation, result.done
            self.reward += result.reward or 0.0
            return str(self.observation)

        def close(self) -> None:
            self.client.close()

    return Rollout


def rollouts(name: str, url: str, count: int, steps: int) -> dict[str, Any]:
    """`count` rollouts at once, each a reset and `steps` tool calls (fewer when its game ends first)."""
    environment_factory = factory(name, url)

    # GRPOTrainer makes the instances one after another when it starts (one per rollout of a generation batch), then
    # plays them all at once.
    environments = [environment_factory() for _ in range(count)]

    def rollout(environment: Any) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            environment.reset(prompt="ignored")
            played = 0
            while played < steps and not environment.done:
                environment.play(legal(name, environment.observation))
                played += 1
            return {"steps": played, "done": environment.done, "s": time.perf_counter() - started}
        except Exception:
            return {"error": traceback.format_exc(limit=2)[-600:], "steps": 0}
        finally:
            environment.close()

    started = time.perf_counter()
    with ThreadPoolExecutor(count) as pool:
        results = list(pool.map(rollout, environments))
    return {"rollouts": results, "wall_s": time.perf_counter() - started}


if __name__ == "__main__":
    arguments = json.loads(sys.argv[1])
    if arguments["mode"] == "autoenv":
        print(json.dumps(typed(arguments["urls"])))
    else:
        print(json.dumps(rollouts(arguments["name"], arguments["url"], arguments["rollouts"], arguments["steps"])))
