"""The catalog made ready from local sources only: its schema, a crashed sync's leftovers, the template folders."""

from pathlib import Path

from sqlalchemy import Engine

from catalog.sync import close_interrupted_runs
from catalog.templates import index_templates
from core.db import init_db
from core.leases import Leases


def prepare_catalog(engine: Engine, leases: Leases, template_roots: list[Path]) -> None:
    """All local, no network: what a server does before it starts, and a command that reads the catalog."""
    init_db(engine)
    close_interrupted_runs(engine, leases)
    index_templates(engine, template_roots)
