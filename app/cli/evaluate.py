"""python -m app eval: a model or a baseline over an environment's episodes, launched for the run."""

import argparse
import asyncio
import os
import sys
import time
from typing import Any

from tqdm import tqdm

from app.settings import Settings
from core.errors import EnvhubError
from evals.harnesses import HARNESSES


def evaluate(settings: Settings, args: argparse.Namespace) -> int:
    """Run an evaluation here, with envhub's own gateway on a loopback port, and record it in the catalog."""
    policy: Any = {"preset": args.preset} if args.preset else args.baseline
    if args.harness:
        if not args.preset:
            print("envhub: --harness needs --preset, the model preset the harness's calls go to", file=sys.stderr)
            return 2
        policy = {"harness": args.harness, "preset": args.preset}
    if args.model_url:
        if not args.model:
            print("envhub: --model-url needs --model, the model's name on that server", file=sys.stderr)
            return 2
        model = {"base_url": args.model_url, "model": args.model, "temperature": args.temperature}
        key = os.environ.get(args.api_key_env) if args.api_key_env else None
        if args.api_key_env and not key:
            print(f"envhub: ${args.api_key_env} is empty; export the model's API key in it", file=sys.stderr)
            return 2
        policy = {"model": {**model, **({"api_key": key} if key else {})}}
    from pydantic import ValidationError

    from app.usecases.evaluations import EvaluationRequest

    tasks: dict[str, Any] = {"episodes": args.episodes, "split": args.split, "dataset": args.dataset}
    try:
        body = EvaluationRequest(
            environment=args.environment,
            policy=policy,
            concurrency=args.concurrency,
            max_steps=args.max_steps,
            **tasks,
        )
    except ValidationError as exc:
        print(f"envhub: {exc.errors()[0]['msg']}", file=sys.stderr)
        return 2
    return asyncio.run(_evaluate(settings, body, quiet=args.quiet or args.json, as_json=args.json))


async def _evaluate(settings: Settings, body: Any, *, quiet: bool, as_json: bool) -> int:
    from app.cli.loopback import NotServing, served
    from core.callers import Caller
    from evals.models import UNDER_WAY

    try:
        async with served(settings) as loopback:
            services = loopback.services
            began = time.monotonic()  # the run's own wall time leaves out starting the environment's server
            try:
                run = await services.evaluator.start(body, Caller(admin=True), None, loopback.url_of)
            except EnvhubError as exc:
                print(f"envhub: {exc.message}", file=sys.stderr)
                return 1
            with tqdm(total=run.episodes_planned, unit="episode", disable=quiet, file=sys.stderr, desc=run.id) as bar:
                while True:
                    row = services.evaluations.get(run.id)
                    summary = row.summary or {}
                    bar.update(int(summary.get("episodes") or 0) - bar.n)
                    if summary.get("mean_reward") is not None:
                        bar.set_postfix_str(f"mean reward {summary['mean_reward']:.3f}")
                    if row.status not in UNDER_WAY:
                        break
                    await asyncio.sleep(0.25)
            public = services.evaluations.public(run.id)
    except NotServing as exc:
        print(exc, file=sys.stderr)
        return 1
    if as_json:
        print(public.model_dump_json(indent=2))
    else:
        print_summary(public, time.monotonic() - began)
    return 0 if public.status == "finished" else 1


def print_summary(run: Any, total_s: float | None = None) -> None:
    """The run's figures; total_s: the command's own time, the server's start included."""
    s = run.summary or {}

    def number(key: str, digits: int = 3) -> str:
        value = s.get(key)
        return "-" if value is None else f"{value:.{digits}f}"

    ci = f" ± {s['ci95']:.3f}" if s.get("ci95") is not None else ""
    started = f", {total_s:.1f} s with the server's start" if total_s else ""
    rows = [
        ("evaluation", run.id),
        ("environment", run.environment + (f" @ {run.revision[:12]}" if run.revision else "")),
        ("policy", run.policy_label),
        ("status", run.status.value + (f": {run.message}" if run.message else "")),
        ("episodes", f"{s.get('episodes', 0)} of {run.episodes_planned} ({s.get('completed', 0)} reached done)"),
        ("mean reward", number("mean_reward") + ci),
        ("success rate", number("success_rate")),
        ("mean steps", number("mean_steps", 1)),
        ("invalid rate", number("invalid_rate")),
        ("tokens", f"{s.get('tokens', 0):,}"),
        ("wall time", f"{s.get('wall_s', 0):.1f} s{started}"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    failed = [e for e in run.episodes if e.status == "failed"]
    for episode in failed[:5]:
        print(f"  episode {episode.index} failed: {episode.error}")


def add(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    command = commands.add_parser("eval", help="evaluate a model or a baseline on an environment's episodes")
    command.add_argument(
        "environment",
        help="an environment id from the catalog, e.g. template:wordle, or owner/name@<sha> for a revision",
    )
    model_cmd = command.add_mutually_exclusive_group()
    model_cmd.add_argument("--model-url", help="an OpenAI-compatible server's base URL, e.g. http://127.0.0.1:8000/v1")
    model_cmd.add_argument("--preset", help="a model preset saved by the admin or without sign-in (GET /api/models)")
    command.add_argument(
        "--harness",
        choices=list(HARNESSES),
        help="run this harness CLI headless per episode, its model the --preset (see python -m app harnesses)",
    )
    command.add_argument("--model", help="the model's name on that server")
    command.add_argument("--api-key-env", metavar="VAR", help="the environment variable holding the model's API key")
    command.add_argument("--temperature", type=float, default=None)
    command.add_argument("--baseline", choices=["random", "first-legal"], default="random", help="without a model")
    command.add_argument("--episodes", type=int, default=8, help="episodes (seeds 0..N-1), or tasks of --split")
    command.add_argument("--split", help="play the first --episodes tasks of this Task API split (or --dataset's)")
    command.add_argument("--dataset", help="a linked dataset whose --split rows reset the episodes")
    command.add_argument("--concurrency", type=int, default=1)
    command.add_argument("--max-steps", type=int, default=100)
    command.add_argument("--json", action="store_true", help="print the run and its episodes as JSON")
    command.add_argument("--quiet", action="store_true", help="no progress bar")
    command.set_defaults(handler=evaluate)
