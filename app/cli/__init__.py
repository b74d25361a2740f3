"""The envhub command line: python -m app serve | sync | search | check | validate | statistics | eval | deploy |
harnesses, a module a command.

app.main and app.services are imported where a command uses them: they build the whole app (the web page too),
which `check` does not need.
"""

import argparse
from collections.abc import Sequence

from app import logs
from app.cli import check, deploy, evaluate, harnesses, search, serve, statistics, sync, validate
from app.settings import Settings

__all__ = ["main", "parser"]


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="python -m app", description="envhub: a hub for OpenEnv environments")
    commands = root.add_subparsers(dest="command", required=True)
    for command in (serve, sync, search, check, validate, statistics, evaluate, deploy, harnesses):
        command.add(commands)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logs.configure(args.command)
    code: int = args.handler(Settings(), args)
    return code
