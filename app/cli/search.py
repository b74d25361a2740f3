"""python -m app search: the catalog from the terminal, as the API searches it."""

import argparse
import json

from sqlmodel import Session

from app.settings import Settings
from catalog.local import prepare_catalog
from catalog.models import Source
from catalog.search import EnvironmentQuery, Sort, catalog_extent, search_environments
from core.db import create_db_engine
from core.leases import Leases


def search(settings: Settings, args: argparse.Namespace) -> int:
    # Only the database and the template folders: the whole app (app.services) would cost seconds to import.
    engine = create_db_engine(settings.database_url)
    prepare_catalog(engine, Leases(engine, ttl_s=settings.lease_ttl_s), settings.template_roots())
    query = EnvironmentQuery(q=" ".join(args.query), tags=args.tag, sort=args.sort, limit=args.limit)
    with Session(engine) as session:
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


def add(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    command = commands.add_parser("search", help="search the catalog")
    command.add_argument("query", nargs="*", help="words to find (none: everything)")
    command.add_argument("--tag", action="append", default=[], help="require a tag (repeatable)")
    command.add_argument("--sort", choices=[s.value for s in Sort], default=Sort.RELEVANCE.value)
    command.add_argument("--limit", type=int, default=20)
    command.add_argument("--json", action="store_true", help="print JSON as the API returns it")
    command.set_defaults(handler=search)
