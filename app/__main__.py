"""The envhub command line: python -m app serve | sync | search | check | eval | deploy."""

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from tqdm import tqdm

from app import logs
from app.settings import Settings
from catalog.models import Source, SyncStatus
from catalog.search import EnvironmentQuery, Sort, catalog_extent, search_environments
from conformance import ConformanceReport, Outcome, check_url, unreachable
from conformance.quality import QualityReport, QualityTarget, Verdict, check_quality
from core.errors import ConflictError, EnvhubError, RefusedURLError
from core.outbound import OutboundGuard

# app.main and app.services are imported where they are used: they build the whole app (the UI too), which `check`
# does not need.


def serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from app.main import create_app
    from app.server import server_config

    page = "" if settings.ui else "; no web page (ENVHUB_UI=false): the API and the gateway only"
    print(f"envhub: serving on http://{args.host}:{args.port} (catalog {settings.database_url}{page})", flush=True)
    # Behind a proxy (a Space): uvicorn takes the scheme from X-Forwarded-Proto, the app the host. The gateway
    # pings the WebSocket sessions it relays: a client that leaves a ping unanswered for an interval is let go.
    config = server_config(
        create_app(settings), host=args.host, port=args.port, proxy_headers=True, forwarded_allow_ips="*"
    )
    logs.quiet_page_requests()
    uvicorn.Server(config).run()
    return 0


def sync(settings: Settings, args: argparse.Namespace) -> int:
    from app.services import Services

    services = Services.build(settings)
    services.prepare_catalog()
    print(f"envhub: syncing from {settings.hf_endpoint}", file=sys.stderr)
    leases = services.leases
    leases.start()  # a running server's replicas see this sync and wait for it
    try:
        with tqdm(total=0, unit="space", desc="downloading cards", disable=args.quiet, file=sys.stderr) as bar:

            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)

            run = services.syncer.run(full=args.full, progress=progress)
    except ConflictError as exc:
        print(f"envhub: {exc.message}", file=sys.stderr)
        return 1
    finally:
        leases.stop()
    print(run.summary())
    return 0 if run.status == SyncStatus.OK else 1


def search(settings: Settings, args: argparse.Namespace) -> int:
    from app.services import Services

    services = Services.build(settings)
    services.prepare_catalog()
    query = EnvironmentQuery(q=" ".join(args.query), tags=args.tag, sort=args.sort, limit=args.limit)
    with services.db() as session:
        found, count = search_environments(session, query)
        extent = catalog_extent(session) if count == 0 else None
    if args.json:
        print(json.dumps({"data": [e.model_dump(mode="json") for e in found], "count": count}, indent=2))
        return 0
    for env in found:
        stage = f" [{env.runtime_stage}]" if env.runtime_stage else ""
        print(f"{env.emoji or '•'} {env.id}  ♥{env.likes}{stage}\n    {env.title}: {env.description[:100]}")
    print(f"{count} found" + (f", showing {len(found)}" if count > len(found) else ""))
    if extent is not None:  # what the search ran over, and how to get more
        print(extent.describe())
        if not extent.by_source.get(Source.HUB):
            print("Index the Hub's environment Spaces with: python -m app sync")
    return 0


_MARKS = {Outcome.PASS: "pass", Outcome.FAIL: "FAIL", Outcome.SKIP: "skip", Outcome.ERROR: "ERROR"}


def print_report(report: ConformanceReport) -> None:
    """The report as a table a person reads: one line per check, the reason under each that did not pass."""
    profile = report.profile
    facts = [f"openenv {profile.generation}" if profile.generation == "0.10" else "an older openenv server"]
    if profile.mode:
        facts.append(f"{profile.mode} mode")
    if profile.mcp_tools:
        facts.append(f"{profile.mcp_tools} MCP tools")
    if profile.env_name:
        facts.append(f"Task API name {profile.env_name!r}")
    print(f"{report.url}: {', '.join(facts)}\n")
    print(f"{'#':<4} {'level':<5} {'result':<6} {'ms':>7}  check")
    for check in report.checks:
        print(
            f"{check.id:<4} {check.level.value:<5} {_MARKS[check.result]:<6} {check.duration_ms:>7.0f}  {check.title}"
        )
        if check.result != Outcome.PASS and check.message:
            print(f"{'':<26}↳ {check.message}")
    skipped = sum(c.result == Outcome.SKIP for c in report.checks)
    verdict = "conforms" if report.conforms else "does NOT conform"
    print(
        f"\n{verdict}: {report.core_passed}/{report.core_total} core checks passed, {len(report.warnings)} warnings, "
        f"{skipped} skipped, in {report.seconds:.1f} s"
    )


def _figures(report: QualityReport) -> str:
    figures = report.figures
    parts = []
    if figures.cold_start_s is not None:
        parts.append(f"cold start {figures.cold_start_s:g} s (from the {figures.cold_start_from})")
    for sessions, rate in figures.steps_per_s.items():
        parts.append(f"{rate:g} steps/s at {sessions} session(s)")
    if figures.capacity is not None:
        parts.append(f"{figures.capacity}{'' if figures.capacity_reached else '+'} sessions at once")
    if figures.memory_per_session_mb is not None:
        parts.append(f"{figures.memory_per_session_mb:g} MiB per session")
    return "; ".join(parts) or "none measured"


def print_quality(report: QualityReport) -> None:
    """The quality report as a table: one line per check, its evidence and fix under each that did not pass."""
    print(f"{report.target}: quality report" + (f" of {report.environment}" if report.environment else "") + "\n")
    print(f"{'check':<31} {'result':<6} {'s':>6}  evidence")
    for result in report.results:
        first, *rest = result.evidence or [""]
        print(f"{result.check_id:<31} {_MARKS[result.status]:<6} {result.duration_s:>6.2f}  {first}")
        if result.status != Outcome.PASS:
            for line in rest:
                print(f"{'':<47}{line}")
            if result.remediation:
                print(f"{'':<45}↳ fix: {result.remediation}")
    print(f"\nfigures: {_figures(report)}")
    for note in report.figures.notes:
        print(f"  {note}")
    print(f"\nverdict: {report.verdict.value.upper()}, in {report.duration_s:.1f} s")


def check(settings: Settings, args: argparse.Namespace) -> int:
    # The command runs with its user's own network access, so private addresses are allowed unless asked not to.
    guard = OutboundGuard(allow_private=not args.public_only)
    quality = args.suite == "quality"
    deadline = args.deadline or (60 if quality else 30)
    try:
        absent = asyncio.run(unreachable(args.url, guard, timeout_s=args.timeout))
        if absent is not None:  # one fact, rather than every check failing for it
            print(
                f"envhub: nothing answers at {args.url}: {absent}. Is the server running, at this host and port?",
                file=sys.stderr,
            )
            return 1
        if quality:
            target = QualityTarget(args.url)
            found = asyncio.run(check_quality(target, guard, timeout_s=args.timeout, deadline_s=deadline))
        else:
            report = asyncio.run(check_url(args.url, guard, timeout_s=args.timeout, deadline_s=deadline))
    except RefusedURLError as exc:
        print(f"envhub: {exc.message}", file=sys.stderr)
        return 1
    if args.json:
        print((found if quality else report).model_dump_json(indent=2))
    elif quality:
        print_quality(found)
    else:
        print_report(report)
    if quality:
        return 1 if found.verdict == Verdict.FAIL else 0  # as openenv validate: 0 for pass or warn
    return 0 if report.conforms else 1


def evaluate(settings: Settings, args: argparse.Namespace) -> int:
    """Run an evaluation here, with envhub's own gateway on a loopback port, and record it in the catalog."""
    policy: Any = {"preset": args.preset} if args.preset else args.baseline
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

    from app.evaluations import EvaluationRequest

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
    import uvicorn

    from app.evaluations import start_evaluation
    from app.main import create_app
    from app.server import server_config
    from core.callers import Caller
    from evals.models import UNDER_WAY
    from gateway.paths import gateway_path

    # envhub's own gateway, on a loopback port for this run only: the run plays through it, as in the server.
    # The command runs with its user's own network access, so a model on a private address is allowed.
    # It serves no web page.
    local = {"sync_interval_s": 0, "health_interval_s": 0, "allow_private_urls": True, "ui": False}
    app = create_app(settings.model_copy(update=local))
    server = uvicorn.Server(server_config(app, host="127.0.0.1", port=0, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            print("envhub: could not serve the gateway on loopback", file=sys.stderr)
            return 1
        await asyncio.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    services = app.state.services
    began = time.monotonic()  # the run's own wall time leaves out starting the environment's server
    try:
        try:
            run = await start_evaluation(
                services, body, Caller(admin=True), lambda endpoint: f"http://127.0.0.1:{port}{gateway_path(endpoint)}"
            )
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
    finally:
        server.should_exit = True
        await serving
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


def deploy(settings: Settings, args: argparse.Namespace) -> int:
    from huggingface_hub import HfApi, get_token

    from app.deploy import DeployError, Deployment, deploy_space, parse_assignment

    token = args.token or (settings.hf_token.get_secret_value() if settings.hf_token else None) or get_token()
    try:
        if not token:
            raise DeployError(
                f"no Hugging Face token: set HF_TOKEN or pass --token (a write token from "
                f"{settings.hf_endpoint.rstrip('/')}/settings/tokens)"
            )
        secrets = dict(parse_assignment(s, os.environ) for s in args.secret)
        if args.database_url:
            secrets["ENVHUB_DATABASE_URL"] = args.database_url
        deployment = Deployment(
            space_id=args.space,
            private=args.private,
            title=args.title,
            variables=dict(parse_assignment(v, os.environ) for v in args.variable),
            secrets=secrets,
        )
        deployed = deploy_space(HfApi(endpoint=settings.hf_endpoint, token=token), deployment)
    except DeployError as exc:
        print(f"envhub: {exc}", file=sys.stderr)
        return 1
    if "ENVHUB_ADMIN_TOKEN" not in deployment.secrets:
        print("note: no ENVHUB_ADMIN_TOKEN secret, so admin actions (e.g. POST /api/sync) are refused on the Space")
    host = deployed.app_url.removeprefix("https://")
    print(f"\ndeployed {deployed.space_id}\n  Space: {deployed.space_url}\n  App:   {deployed.app_url}  (host {host})")
    return 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="python -m app", description="envhub: a hub for OpenEnv environments")
    commands = root.add_subparsers(dest="command", required=True)

    serve_cmd = commands.add_parser("serve", help="serve the API and UI")
    serve_cmd.add_argument("--host", default="127.0.0.1")
    serve_cmd.add_argument("--port", type=int, default=7860)
    serve_cmd.set_defaults(handler=serve)

    sync_cmd = commands.add_parser("sync", help="index environment Spaces and datasets from the Hub")
    sync_cmd.add_argument("--full", action="store_true", help="download every card again, changed or not")
    sync_cmd.add_argument("--quiet", action="store_true", help="no progress bar")
    sync_cmd.set_defaults(handler=sync)

    search_cmd = commands.add_parser("search", help="search the catalog")
    search_cmd.add_argument("query", nargs="*", help="words to find (none: everything)")
    search_cmd.add_argument("--tag", action="append", default=[], help="require a tag (repeatable)")
    search_cmd.add_argument("--sort", choices=[s.value for s in Sort], default=Sort.RELEVANCE.value)
    search_cmd.add_argument("--limit", type=int, default=20)
    search_cmd.add_argument("--json", action="store_true", help="print JSON as the API returns it")
    search_cmd.set_defaults(handler=search)

    check_cmd = commands.add_parser(
        "check", help="check an endpoint URL against the OpenEnv protocol, or run a quality report of it"
    )
    check_cmd.add_argument("url", help="the base URL of an OpenEnv server, e.g. http://127.0.0.1:8000")
    check_cmd.add_argument(
        "--suite",
        choices=["protocol", "quality"],
        default="protocol",
        help="protocol: the conformance checklist (default); quality: determinism, isolation, rewards, floor",
    )
    check_cmd.add_argument("--json", action="store_true", help="print the report as JSON")
    check_cmd.add_argument("--timeout", type=float, default=10, help="seconds per request (default 10)")
    check_cmd.add_argument(
        "--deadline", type=float, help="seconds for the whole check (default 30; 60 for a quality report)"
    )
    check_cmd.add_argument(
        "--public-only", action="store_true", help="refuse loopback and private addresses, as a hosted envhub does"
    )
    check_cmd.set_defaults(handler=check)

    eval_cmd = commands.add_parser("eval", help="evaluate a model or a baseline on an environment's episodes")
    eval_cmd.add_argument(
        "environment",
        help="an environment id from the catalog, e.g. template:wordle, or owner/name@<sha> for a revision",
    )
    model_cmd = eval_cmd.add_mutually_exclusive_group()
    model_cmd.add_argument("--model-url", help="an OpenAI-compatible server's base URL, e.g. http://127.0.0.1:8000/v1")
    model_cmd.add_argument("--preset", help="a model preset saved by the admin or without sign-in (GET /api/models)")
    eval_cmd.add_argument("--model", help="the model's name on that server")
    eval_cmd.add_argument("--api-key-env", metavar="VAR", help="the environment variable holding the model's API key")
    eval_cmd.add_argument("--temperature", type=float, default=None)
    eval_cmd.add_argument("--baseline", choices=["random", "first-legal"], default="random", help="without a model")
    eval_cmd.add_argument("--episodes", type=int, default=8, help="episodes (seeds 0..N-1), or tasks of --split")
    eval_cmd.add_argument("--split", help="play the first --episodes tasks of this Task API split (or --dataset's)")
    eval_cmd.add_argument("--dataset", help="a linked dataset whose --split rows reset the episodes")
    eval_cmd.add_argument("--concurrency", type=int, default=1)
    eval_cmd.add_argument("--max-steps", type=int, default=100)
    eval_cmd.add_argument("--json", action="store_true", help="print the run and its episodes as JSON")
    eval_cmd.add_argument("--quiet", action="store_true", help="no progress bar")
    eval_cmd.set_defaults(handler=evaluate)

    deploy_cmd = commands.add_parser("deploy", help="create or update a Docker Space running this envhub")
    deploy_cmd.add_argument("--space", required=True, metavar="OWNER/NAME", help="the Space, e.g. alice/envhub")
    deploy_cmd.add_argument("--private", action="store_true", help="create the Space private (a new Space only)")
    deploy_cmd.add_argument("--title", help="the Space's title (default: its name)")
    deploy_cmd.add_argument("--token", help="a Hugging Face write token (default: HF_TOKEN, else your saved login)")
    deploy_cmd.add_argument(
        "--variable", action="append", default=[], metavar="KEY=VALUE", help="a Space variable (repeatable)"
    )
    deploy_cmd.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="KEY[=VALUE]",
        help="a Space secret, e.g. ENVHUB_ADMIN_TOKEN; KEY alone takes the value from your environment (repeatable)",
    )
    deploy_cmd.add_argument("--database-url", help="the catalog database, stored as the secret ENVHUB_DATABASE_URL")
    deploy_cmd.set_defaults(handler=deploy)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logs.configure(args.command)
    code: int = args.handler(Settings(), args)
    return code


if __name__ == "__main__":
    sys.exit(main())
