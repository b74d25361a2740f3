"""GRPO with TRL through an envhub endpoint URL: a model learns the maze template, one WebSocket session per rollout.

Run it in a virtualenv with examples/requirements-trl.txt installed, against a running maze endpoint:

    python examples/grpo_envhub.py --url http://127.0.0.1:7860/endpoints/ID       # tiny model on a CPU, ~1 minute
    python examples/grpo_envhub.py --url URL --model Qwen/Qwen3-0.6B --size 3 --mazes 64 --steps 200 \\
        --max-completion-length 4096                                             # on a GPU
    python examples/grpo_envhub.py --url URL_A --url URL_B   # TRL's multi-environment form: one class per endpoint

Each rollout is one `Maze` instance: TRL resets it with the dataset row, offers its public method `move` to the model
as a tool, and reads the reward the environment itself gave. TRL keeps `--batch` instances (so as many sessions) open
on each endpoint for the whole run. Without `--model`, a model of about 100k parameters is built and taught the first
move (examples/tiny_model.py): a random model never calls a tool, so the environment would never be stepped.
"""

import argparse
import os
import sys
import tempfile
import warnings
from functools import partial
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from openenv.core.generic_client import GenericEnvClient
from transformers import PrinterCallback, TrainerCallback
from transformers.utils import logging
from trl import GRPOConfig, GRPOTrainer

PROMPT = "Walk the maze to the exit 'E' with the move tool; 'A' is you, '#' a wall."
SEPARATOR = "\n\n"  # between the prompt and the reset's observation, which TRL joins with nothing
MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


class Maze:
    """One episode per rollout on the endpoint at `url`; TRL offers the public methods to the model as tools."""

    def __init__(self, url: str) -> None:
        self.client = GenericEnvClient(base_url=url).sync()
        self.reward = 0.0
        self.done = False

    def reset(self, **kwargs: Any) -> str:
        # TRL passes the dataset row (prompt, seed, size) and appends what this returns to the prompt.
        self.reward, self.done = 0.0, False
        observation = self.client.reset(seed=kwargs["seed"], size=kwargs["size"]).observation
        return SEPARATOR + _shown(observation)

    def move(self, direction: str) -> str:
        """Move one square in the maze.

        Args:
            direction: Where to move. (choices: ["up", "down", "left", "right"])

        Returns:
            The maze after the move, and what happened.
        """
        if self.done:
            raise ValueError("The episode is over.")
        if direction not in MOVES:  # checked here: a bad action would cost the server a step and an error
            raise ValueError(f"direction must be one of {', '.join(MOVES)}.")
        result = self.client.step({"direction": direction})
        self.reward += result.reward or 0.0
        self.done = result.done
        return _shown(result.observation)


def _shown(observation: dict[str, Any]) -> str:
    """The observation as the model reads it: what happened and the grid (not the PNG, which would fill the
    completion: TRL counts tool results in max_completion_length)."""
    return f"{observation['message']}\n{observation['grid']}"


def reward_func(environments: list[Maze], **kwargs: Any) -> list[float]:
    """The environment's own reward, summed over the rollout's moves."""
    return [env.reward for env in environments]


class PrintRewards(TrainerCallback):
    """One line per training step: the mean reward of its rollouts and the moves each made."""

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float], **kwargs: Any) -> None:
        if "reward" in logs:
            moves = logs.get("tools/call_frequency", 0.0)
            print(f"step {state.global_step}/{state.max_steps}: reward {logs['reward']:+.4f}, {moves:.2f} moves")


def tiny_model(url: str, seed: int, size: int, folder: Path) -> Path:
    """Build the tiny model and teach it one good first move on the maze this seed gives (looked at once)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from tiny_model import build, tool_call, warm_up

    look = Maze(url)
    observation = look.client.reset(seed=seed, size=size).observation
    look.client.close()
    grid, (row, column) = observation["grid"].splitlines(), observation["position"]
    first = next(d for d, (dr, dc) in MOVES.items() if grid[row + dr][column + dc] != "#")
    prompt = [{"role": "user", "content": PROMPT + SEPARATOR + _shown(observation)}]
    return warm_up(build(folder), prompt, [look.move], tool_call("move", {"direction": first}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", action="append", required=True, help="an endpoint's URL; twice for two endpoints")
    parser.add_argument("--model", help="a model name or folder (default: build a tiny one and warm it up)")
    parser.add_argument("--steps", type=int, default=5, help="training steps")
    parser.add_argument("--batch", type=int, default=4, help="rollouts per step: sessions held on each endpoint")
    parser.add_argument("--mazes", type=int, default=1, help="distinct mazes (seeds) in the dataset")
    parser.add_argument("--size", type=int, default=6, help="cells per side of each maze")
    parser.add_argument("--max-completion-length", type=int, default=128, help="tokens per rollout, tool results too")
    parser.add_argument("--seed", type=int, default=0, help="the training's seed, and the first maze's")
    parser.add_argument("--output-dir", type=Path, default=Path("grpo-envhub"), help="where trainer_state.json goes")
    args = parser.parse_args()

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    warnings.filterwarnings("ignore", category=FutureWarning)  # transformers' renames, which TRL still calls

    logging.disable_progress_bar()
    on_gpu = torch.cuda.is_available()
    if not on_gpu:
        torch.set_num_threads(1)  # on a small shared CPU, one thread is several times faster than the default
    scratch = tempfile.TemporaryDirectory(prefix="grpo-envhub-")
    model = args.model or str(tiny_model(args.url[0], args.seed, args.size, Path(scratch.name) / "tiny"))

    names = [f"maze-{i}" for i in range(len(args.url))]
    rows: dict[str, list[Any]] = {"prompt": [], "seed": [], "size": [], "environment": []}
    for i in range(max(args.steps, args.mazes)):  # one row per step: its `batch` rollouts share a maze (a group)
        rows["prompt"].append([{"role": "user", "content": PROMPT}])
        rows["seed"].append(args.seed + i % args.mazes)
        rows["size"].append(args.size)
        rows["environment"].append(names[i % len(names)])  # in turn, one endpoint per step
    factory: Any = partial(Maze, args.url[0])
    if len(args.url) > 1:
        factory = {name: partial(Maze, url) for name, url in zip(names, args.url, strict=True)}
    else:
        del rows["environment"]

    for url in args.url:
        api = url.replace("/endpoints/", "/api/endpoints/", 1)
        print(f"The endpoint's figures, live: {api} (stats: active_sessions, steps, errors) or its Launch tab")
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_func,
        train_dataset=Dataset.from_dict(rows),
        environment_factory=factory,
        callbacks=[PrintRewards()],
        args=GRPOConfig(
            output_dir=str(args.output_dir),
            max_steps=args.steps,
            per_device_train_batch_size=args.batch,
            num_generations=args.batch,
            generation_batch_size=args.batch,  # TRL holds this many sessions on each endpoint for the whole run
            max_completion_length=args.max_completion_length,
            chat_template_kwargs={"enable_thinking": False},
            shuffle_dataset=False,  # rows in order: endpoints in turn
            learning_rate=1e-5,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            seed=args.seed,
            use_cpu=not on_gpu,
            bf16=on_gpu and torch.cuda.is_bf16_supported(),
        ),
    )
    trainer.remove_callback(PrinterCallback)  # PrintRewards says what matters here
    trainer.train()
    trainer.state.save_to_json(str(args.output_dir / "trainer_state.json"))
    print(f"Done: {trainer.state.global_step} steps; the log is in {args.output_dir / 'trainer_state.json'}")
    scratch.cleanup()


if __name__ == "__main__":
    main()
