"""python -m app statistics: does an environment teach? A statistical report of an endpoint, or of an environment
launched for it, as a table or JSON; exit 0 for pass or warn, 1 for fail, as openenv validate."""

import argparse
import asyncio
import sys
from typing import Any

from app.settings import Settings
from conformance.report import Report

_MARKS = {"pass": "pass", "fail": "FAIL", "skip": "skip", "error": "ERROR"}


def statistics(settings: Settings, args: argparse.Namespace) -> int:
    """Run a statistical report here, with envhub's own gateway on a loopback port, and file it in the catalog."""
    return asyncio.run(_statistics(settings, args.target, args.preset or [], args.split, as_json=args.json))


async def _statistics(settings: Settings, target: str, presets: list[str], split: str | None, *, as_json: bool) -> int:
    from app.cli.loopback import NotServing, served
    from app.usecases.statistics import StatisticsRequest
    from core.callers import Caller
    from core.errors import EnvhubError, NotFoundError
    from evals.runs import PrepareError
    from hosting.options import LaunchRequest

    try:
        async with served(settings) as loopback:
            services = loopback.services
            manager, caller = services.endpoints, Caller(admin=True)
            launched = None
            try:
                try:
                    endpoint = await asyncio.to_thread(manager.get, target)
                except NotFoundError:  # not an endpoint: an environment, launched for the report
                    request = LaunchRequest(environment=target)
                    launched = endpoint = await asyncio.to_thread(manager.launch, request, caller)
                await services.evaluator.wait_running(endpoint.id)
                body = StatisticsRequest(endpoint=endpoint.id, presets=presets, split=split)
                filed = await services.statistics.start(body, caller, loopback.url_of)
                if not as_json:
                    print(
                        f"{filed.report.target}: statistical report {filed.id} of {filed.environment}, under way",
                        flush=True,
                    )
                await services.statistics.ended(filed.id)
                report = await asyncio.to_thread(services.statistics.filed, filed.id)
            except (EnvhubError, PrepareError) as exc:
                print(f"envhub: {getattr(exc, 'message', exc)}", file=sys.stderr)
                return 1
            finally:
                if launched is not None:
                    await asyncio.to_thread(manager.end, launched.id, "its statistical report ended")
    except NotServing as exc:
        print(exc, file=sys.stderr)
        return 1
    if as_json:
        print(report.model_dump_json(indent=2))
    else:
        print_statistics(report.report)
    return 1 if report.verdict in (None, "fail") else 0


def _measured(measured: dict[str, Any]) -> str:
    """The figures a person reads first: the numbers, not the evidence's ids."""
    numbers = {k: v for k, v in measured.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    return ", ".join(f"{key} {value:.3g}" for key, value in numbers.items())


def print_statistics(report: Report) -> None:
    """The report as a table: one line per check with what it measured, the fix under each that did not pass."""
    if report.status == "failed":
        print(f"failed ({report.code}): {report.message}")
    print(f"{'check':<36} {'result':<6}  measured")
    for result in report.results:
        print(f"{result.check_id:<36} {_MARKS[result.status]:<6}  {_measured(result.measured)}")
        for line in result.evidence[:3]:
            print(f"{'':<36} {line}")
        if result.status != "pass" and result.remediation:
            print(f"{'':<36} ↳ fix: {result.remediation}")
    print(f"\n{'player':<24} {'mean reward':>16} {'pass rate':>10}  evaluation")
    run = report.statistics
    for player in run.players if run is not None else ():
        mean = "-" if player.mean_reward is None else f"{player.mean_reward:.3f}"
        se = "" if player.se is None else f" ± {player.se:.3f}"
        rate = "-" if player.pass_rate is None else f"{player.pass_rate:.2f}"
        print(f"{player.label:<24} {mean + se:>16} {rate:>10}  {player.evaluation}")
    verdict = report.verdict.value.upper() if report.verdict is not None else "NONE"
    policy = run.policy_version if run is not None else "no gate policy"
    print(f"\nverdict: {verdict} under {policy}, in {report.duration_s:.1f} s")


def add(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    command = commands.add_parser(
        "statistics", help="does it teach? a statistical report of an endpoint, or of an environment launched for it"
    )
    command.add_argument(
        "target", metavar="ENV_OR_ENDPOINT", help="an endpoint id, or an environment id to launch (template:wordle)"
    )
    command.add_argument(
        "--preset", action="append", metavar="NAME", help="a model preset to play, k times per task (repeatable)"
    )
    command.add_argument("--split", help="the Task API split the players play (default: its first, else seeds)")
    command.add_argument("--json", action="store_true", help="print the filed report as JSON")
    command.set_defaults(handler=statistics)
