"""python -m app validate: openenv's own validator on a template, a catalog environment's folder or a folder path,
or on a running server's URL; the report as a table or JSON, the exit code as `openenv validate`'s."""

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from sqlmodel import Session

from app.settings import Settings
from catalog.models import Source
from catalog.store import find_environment
from catalog.templates import TEMPLATE_PREFIX, find_template_folders
from core.db import create_db_engine
from core.errors import EnvhubError, InvalidInputError, PayloadTooLargeError
from core.outbound import OutboundGuard

# openenv validate's exit codes
_PASS, _FAIL, _UNSUPPORTED, _INTERNAL = 0, 1, 2, 3
_LEVELS = ("static", "runtime", "semantic")  # conformance.validator.ValidationLevel, whose import takes seconds


def folder_of(settings: Settings, target: str) -> Path:
    """A folder path as given; else a template by name; else a catalog Space whose snapshot envhub downloaded."""
    if Path(target).is_dir():
        return Path(target)
    name = target.removeprefix(TEMPLATE_PREFIX)
    for folder in find_template_folders(settings.template_roots()):
        if folder.name == name:
            return folder
    engine = create_db_engine(settings.database_url)
    try:
        with Session(engine) as session:
            environment = find_environment(session, target)
    finally:
        engine.dispose()
    if environment is not None and environment.source == Source.HUB and environment.sha:
        snapshot = settings.data_dir / "runtime" / "spaces" / environment.id / environment.sha
        if snapshot.is_dir():
            return snapshot
    raise InvalidInputError(
        f"{target} is no folder, template, or Space envhub has downloaded (a launch downloads one)",
        code="validation_no_folder",
    )


def print_report(report: dict[str, Any], tool: str) -> None:
    """One line per check (criterion, for a URL's report), its evidence and remediation under each that did not
    pass, then the verdict with the policy and openenv versions."""
    if "criteria" in report:
        print(f"{report.get('target')}: running-environment contract ({report.get('standard_profile')})\n")
        for criterion in report["criteria"]:
            print(f"{'pass' if criterion.get('passed') else 'FAIL':<5} {criterion.get('id')}")
            if not criterion.get("passed") and criterion.get("details"):
                print(f"{'':<6}{criterion['details']}")
        print(f"\nverdict: {'PASS' if report.get('passed') else 'FAIL'} ({tool})")
        return
    print(f"{report['target']}: source {report['source_digest'][:12]}, levels run {report['levels_run']}\n")
    for result in report["results"]:
        print(f"{result['status'].upper():<5} {result['check_id']}")
        if result["status"] != "pass":
            for line in result["evidence"]:
                print(f"{'':<6}{line}")
            if result["remediation"]:
                print(f"{'':<6}↳ fix: {result['remediation']}")
    print(f"\nverdict: {report['verdict'].upper()} (policy {report['policy_version']}, {tool})")


def validate(settings: Settings, args: argparse.Namespace) -> int:
    # openenv's, only when it runs
    from conformance.validator import OPENENV_VERSION, ValidationLevel, Validator
    from conformance.validator.provider import engine_provider
    from hosting.runtimes.engine import engine_client

    validator = Validator(
        timeout_s=settings.validator_timeout_s,
        max_running=1,
        policy=settings.validator_policy,
        runtime_policy=settings.validator_runtime_policy,
        url_timeout_s=args.timeout,
    )
    try:
        if args.url is not None:
            # The command runs with its user's own network access: private addresses are theirs to reach.
            report = asyncio.run(validator.validate_url(args.url, OutboundGuard(allow_private=True)))
        elif args.target is not None:
            folder = folder_of(settings, args.target)
            level = ValidationLevel(args.level)
            provider = (
                None if level == ValidationLevel.STATIC else engine_provider(engine_client, settings.docker_base_image)
            )
            report = asyncio.run(validator.validate_folder(folder, level=level, provider=provider))
        else:
            print("envhub: name a template, an environment or a folder, or give --url", file=sys.stderr)
            return _UNSUPPORTED
    except (InvalidInputError, PayloadTooLargeError) as exc:
        print(f"envhub: {exc.message}", file=sys.stderr)
        return _FAIL if args.url is not None else _UNSUPPORTED
    except EnvhubError as exc:
        print(f"envhub: {exc.message}", file=sys.stderr)
        return _INTERNAL
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print_report(report, OPENENV_VERSION)
    passed = report.get("passed") if args.url is not None else report.get("verdict") != "fail"
    return _PASS if passed else _FAIL


def add(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    command = commands.add_parser(
        "validate", help="run openenv's own validator on a template, an environment's folder, or a running URL"
    )
    command.add_argument(
        "target", nargs="?", help="a template (wordle, template:wordle), a Space envhub downloaded, or a folder"
    )
    command.add_argument("--level", choices=_LEVELS, default="static", help="the deepest level run")
    command.add_argument("--url", help="a running server's base URL: the running-environment contract instead")
    command.add_argument("--json", action="store_true", help="print the report as JSON, as openenv validate --json")
    command.add_argument("--timeout", type=float, default=5, help="seconds per request of a --url report (default 5)")
    command.set_defaults(handler=validate)
