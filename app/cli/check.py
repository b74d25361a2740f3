"""python -m app check: a URL against the OpenEnv protocol, or a quality report of it, as a table or JSON."""

import argparse

from app.settings import Settings


def check(settings: Settings, args: argparse.Namespace) -> int:
    from app.cli.checking import run_check  # the checks' modules cost a second or more: only this command pays

    return run_check(settings, args)


def add(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    command = commands.add_parser(
        "check", help="check an endpoint URL against the OpenEnv protocol, or run a quality report of it"
    )
    command.add_argument("url", help="the base URL of an OpenEnv server, e.g. http://127.0.0.1:8000")
    command.add_argument(
        "--suite",
        choices=["protocol", "quality"],
        default="protocol",
        help="protocol: the conformance checklist (default); quality: the hub lane (isolation, termination, "
        "determinism across a pool's replicas) and figures",
    )
    command.add_argument("--json", action="store_true", help="print the report as JSON")
    command.add_argument("--timeout", type=float, default=10, help="seconds per request (default 10)")
    command.add_argument(
        "--deadline", type=float, help="seconds for the whole check (default 30; 60 for a quality report)"
    )
    command.add_argument(
        "--public-only", action="store_true", help="refuse loopback and private addresses, as a hosted envhub does"
    )
    command.set_defaults(handler=check)
