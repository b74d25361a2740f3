"""python -m app harnesses install | list: the agent-harness CLIs envhub runs headless, installed from npm."""

import argparse
import sys

from app.settings import Settings
from core.errors import EnvhubError
from evals.harnesses import HARNESSES, find, harness_named, install, installed


def install_harnesses(settings: Settings, args: argparse.Namespace) -> int:
    try:
        chosen = [harness_named(name) for name in args.names or HARNESSES]
        for harness in chosen:
            print(f"envhub: installing {harness.package}@{harness.version}", file=sys.stderr)
            print(f"{harness.name}  {install(harness, settings.harness_dir).binary}")
    except EnvhubError as exc:
        print(f"envhub: {exc.message} ({exc.code})", file=sys.stderr)
        return 1
    return 0


def list_harnesses(settings: Settings, args: argparse.Namespace) -> int:
    for harness in HARNESSES.values():
        where = find(harness, settings.harness_dir).binary if installed(harness, settings.harness_dir) else "missing"
        package = f"{harness.package}@{harness.version}"
        print(f"{harness.name:12} {package:34} {harness.dialect:10} {where}")
    return 0


def add(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    command = commands.add_parser("harnesses", help="install and list the agent-harness CLIs envhub runs")
    actions = command.add_subparsers(dest="action", required=True)
    installing = actions.add_parser("install", help="install from npm into ENVHUB_HARNESS_DIR")
    installing.add_argument("names", nargs="*", help=f"which of {', '.join(HARNESSES)} (none: all four)")
    installing.set_defaults(handler=install_harnesses)
    listing = actions.add_parser("list", help="each harness, its npm package and where it is installed")
    listing.set_defaults(handler=list_harnesses)
