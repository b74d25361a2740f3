"""Postgres: words match whatever their accents ("cafe" finds "Café"), as SQLite's FTS5 index does.

Two text search configurations of envhub's own, `envhub_english` and `envhub_simple`, are
copies of `english` and `simple` that pass every word through the `unaccent` dictionary
first. The stored tsvector is rebuilt with them (one rewrite of the table) and its GIN
index made again. `unaccent` is a trusted extension: the database's owner may create it.
Where it cannot be created, the configurations are plain copies, and search works as
before, without folding accents.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

log = logging.getLogger(__name__)

_WORD_TOKENS = "asciiword, asciihword, hword_asciipart, word, hword, hword_part"


def _search_column(config: str) -> str:
    """The stored tsvector: weights as bm25's on SQLite (A title; B tags, description; C author; D README)."""
    parts = [
        ("coalesce(title, '')", "A"),
        ("coalesce(tags, '[]'::jsonb)", "B"),
        ("coalesce(description, '')", "B"),
        ("coalesce(author, '')", "C"),
        ("left(coalesce(readme, ''), 200000)", "D"),  # a tsvector holds at most 1 MB
    ]
    vector = "\n    || ".join(f"setweight(to_tsvector('{config}'::regconfig, {text}), '{w}')" for text, w in parts)
    return f"ALTER TABLE environment ADD COLUMN search tsvector GENERATED ALWAYS AS (\n    {vector}\n) STORED"


def _unaccent_available(bind: sa.Connection) -> bool:
    """Create the extension in `public`, where every schema of the database finds it."""
    if bind.execute(sa.text("SELECT 1 FROM pg_extension WHERE extname = 'unaccent'")).first():
        return True
    try:
        with bind.begin_nested():
            bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS unaccent SCHEMA public"))
    except sa.exc.DBAPIError as exc:
        log.warning("Postgres search will not fold accents: cannot create the unaccent extension (%s)", exc.orig)
        return False
    return True


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    folding = _unaccent_available(bind)
    if folding:
        dictionary = bind.execute(
            sa.text(
                "SELECT quote_ident(n.nspname) || '.unaccent' FROM pg_extension e"
                " JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'unaccent'"
            )
        ).scalar_one()
    for name, parent, then in (("envhub_english", "english", "english_stem"), ("envhub_simple", "simple", "simple")):
        op.execute(f"CREATE TEXT SEARCH CONFIGURATION {name} (COPY = {parent})")
        if folding:
            op.execute(
                f"ALTER TEXT SEARCH CONFIGURATION {name} ALTER MAPPING FOR {_WORD_TOKENS} WITH {dictionary}, {then}"
            )
    op.execute("ALTER TABLE environment DROP COLUMN IF EXISTS search")  # and its index
    op.execute(_search_column("envhub_english"))
    op.execute("CREATE INDEX ix_environment_search ON environment USING gin (search) WHERE removed_at IS NULL")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE environment DROP COLUMN IF EXISTS search")
    op.execute(_search_column("english"))
    op.execute("CREATE INDEX ix_environment_search ON environment USING gin (search) WHERE removed_at IS NULL")
    for name in ("envhub_english", "envhub_simple"):
        op.execute(f"DROP TEXT SEARCH CONFIGURATION IF EXISTS {name}")
