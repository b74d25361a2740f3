"""The envhub command line: python -m app serve | sync | search."""

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from sqlmodel import Session
from tqdm import tqdm

from app.main import create_app, hub_from_settings, prepare_catalog
from app.settings import Settings
from catalog.db import create_db_engine
from catalog.models import SyncStatus
from catalog.search import EnvironmentQuery, Sort, search_environments
from catalog.sync import Syncer


def serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    print(f"envhub: serving on http://{args.host}:{args.port} (catalog {settings.database_url})", flush=True)
    uvicorn.run(create_app(settings), host=args.host, port=args.port, proxy_headers=True, forwarded_allow_ips="*")
    return 0


def sync(settings: Settings, args: argparse.Namespace) -> int:
    engine = create_db_engine(settings.database_url)
    prepare_catalog(settings, engine)
    syncer = Syncer(engine, hub_from_settings(settings), workers=settings.hub_workers)
    print(f"envhub: syncing from {settings.hf_endpoint}", file=sys.stderr)
    with tqdm(total=0, unit="space", desc="downloading cards", disable=args.quiet, file=sys.stderr) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        run = syncer.run(full=args.full, progress=progress)
    print(run.summary())
    return 0 if run.status == SyncStatus.OK else 1


def search(settings: Settings, args: argparse.Namespace) -> int:
    engine = create_db_engine(settings.database_url)
    prepare_catalog(settings, engine)
    query = EnvironmentQuery(q=" ".join(args.query), tags=args.tag, sort=args.sort, limit=args.limit)
    with Session(engine) as session:
        found, count = search_environments(session, query)
    if args.json:
        print(json.dumps({"data": [e.model_dump(mode="json") for e in found], "count": count}, indent=2))
        return 0
    for env in found:
        stage = f" [{env.runtime_stage}]" if env.runtime_stage else ""
        print(f"{env.emoji or '•'} {env.id}  ♥{env.likes}{stage}\n    {env.title}: {env.description[:100]}")
    print(f"{count} found" + (f", showing {len(found)}" if count > len(found) else ""))
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
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # envhub reports Hub failures itself, in one line; the client's per-retry warnings would repeat it.
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    code: int = args.handler(Settings(), args)
    return code


if __name__ == "__main__":
    sys.exit(main())
