"""The catalog schema as it stood when migrations began, on a new database or an existing one.

Databases made before Alembic (by `create_all`, with columns added later by ALTER TABLE, and
on SQLite an FTS5 index versioned by PRAGMA user_version) have every table but no
alembic_version. This revision brings such a database to the same schema a new one gets,
keeping its rows: it creates what is missing, adds missing columns, and rebuilds an
outdated full-text index. The tables are written out here, not taken from the models, so
that later revisions start from exactly this schema.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql
from sqlmodel.sql.sqltypes import AutoString as String
from sqlmodel.sql.sqltypes import UTCDateTime as Time

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

schema = sa.MetaData()

sa.Table(
    "checkreport",
    schema,
    sa.Column("url", String(), nullable=False),
    sa.Column("environment", String(), nullable=True, index=True),
    sa.Column("endpoint", String(), nullable=True, index=True),
    sa.Column("created_at", Time(), nullable=False, index=True),
    sa.Column("conforms", sa.Boolean(), nullable=False),
    sa.Column("core_passed", sa.Integer(), nullable=False),
    sa.Column("core_total", sa.Integer(), nullable=False),
    sa.Column("seconds", sa.Float(), nullable=False),
    sa.Column("id", sa.Integer(), primary_key=True),
    sa.Column("report", sa.JSON(), nullable=False),
)
sa.Table(
    "dataset",
    schema,
    sa.Column("id", String(), primary_key=True),
    sa.Column("author", String(), nullable=True, index=True),
    sa.Column("description", String(), nullable=False),
    sa.Column("tags", sa.JSON(), nullable=False),
    sa.Column("likes", sa.Integer(), nullable=False),
    sa.Column("downloads", sa.Integer(), nullable=False),
    sa.Column("last_modified", Time(), nullable=True),
    sa.Column("problems", sa.JSON(), nullable=False),
    sa.Column("removed_at", Time(), nullable=True, index=True),
    sa.Column("sha", String(), nullable=True),
    sa.Column("card", sa.JSON(), nullable=False),
    sa.Column("indexed_at", Time(), nullable=False),
)
sa.Table(
    "endpoint",
    schema,
    sa.Column("id", String(), primary_key=True),
    sa.Column("environment", String(), nullable=False, index=True),
    sa.Column("backend", sa.Enum("PROCESS", "DOCKER", "SPACE", name="backend"), nullable=False),
    sa.Column(
        "status",
        sa.Enum("STARTING", "RUNNING", "STOPPING", "STOPPED", "FAILED", name="endpointstatus"),
        nullable=False,
        index=True,
    ),
    sa.Column("message", String(), nullable=False),
    sa.Column("owner", String(), nullable=True, index=True),
    sa.Column("options", sa.JSON(), nullable=False),
    sa.Column("created_at", Time(), nullable=False),
    sa.Column("started_at", Time(), nullable=True),
    sa.Column("stopped_at", Time(), nullable=True),
    sa.Column("internal_url", String(), nullable=True),
    sa.Column("handle", sa.JSON(), nullable=False),
    sa.Column("log_path", String(), nullable=True),
    sa.Column("health", sa.JSON(), nullable=True),
    sa.Column("conformance", sa.JSON(), nullable=True),
)
sa.Table(
    "environment",
    schema,
    sa.Column("id", String(), primary_key=True),
    sa.Column("source", sa.Enum("HUB", "TEMPLATE", "URL", name="source"), nullable=False, index=True),
    sa.Column("title", String(), nullable=False),
    sa.Column("emoji", String(), nullable=True),
    sa.Column("description", String(), nullable=False),
    sa.Column("author", String(), nullable=True, index=True),
    sa.Column("tags", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
    sa.Column("likes", sa.Integer(), nullable=False, index=True),
    sa.Column("trending_score", sa.Float(), nullable=False, index=True),
    sa.Column("sdk", String(), nullable=True, index=True),
    sa.Column("host", String(), nullable=True),
    sa.Column("runtime_stage", String(), nullable=True, index=True),
    sa.Column("last_modified", Time(), nullable=True, index=True),
    sa.Column("license", String(), nullable=True),
    sa.Column("problems", sa.JSON(), nullable=False),
    sa.Column("removed_at", Time(), nullable=True, index=True),
    sa.Column("app_port", sa.Integer(), nullable=True),
    sa.Column("base_path", String(), nullable=True),
    sa.Column("path", String(), nullable=True),
    sa.Column("sha", String(), nullable=True),
    sa.Column("card", sa.JSON(), nullable=False),
    sa.Column("manifest", sa.JSON(), nullable=True),
    sa.Column("readme", String(), nullable=False),
    sa.Column("env_metadata", sa.JSON(), nullable=True),
    sa.Column("env_schema", sa.JSON(), nullable=True),
    sa.Column("tools", sa.JSON(), nullable=True),
    sa.Column("tasks", sa.JSON(), nullable=True),
    sa.Column("health", sa.JSON(), nullable=True),
    sa.Column("conformance", sa.JSON(), nullable=True),
    sa.Column("indexed_at", Time(), nullable=False),
)
sa.Table(
    "environmentdataset",
    schema,
    sa.Column("environment_id", String(), primary_key=True),
    sa.Column("dataset_id", String(), primary_key=True, index=True),
    sa.Column("named_by", sa.Enum("ENVIRONMENT", "DATASET", name="linkorigin"), primary_key=True),
)
sa.Table(
    "syncrun",
    schema,
    sa.Column("added", sa.Integer(), nullable=False),
    sa.Column("updated", sa.Integer(), nullable=False),
    sa.Column("unchanged", sa.Integer(), nullable=False),
    sa.Column("removed", sa.Integer(), nullable=False),
    sa.Column("failed", sa.Integer(), nullable=False),
    sa.Column("datasets", sa.Integer(), nullable=False),
    sa.Column("started_at", Time(), nullable=False),
    sa.Column("finished_at", Time(), nullable=True),
    sa.Column("status", sa.Enum("RUNNING", "OK", "FAILED", name="syncstatus"), nullable=False),
    sa.Column("full", sa.Boolean(), nullable=False),
    sa.Column("requests", sa.Integer(), nullable=False),
    sa.Column("seconds", sa.Float(), nullable=False),
    sa.Column("error", String(), nullable=True),
    sa.Column("id", sa.Integer(), primary_key=True),
)
sa.Table(
    "environmenttag",
    schema,
    sa.Column("environment_id", String(), sa.ForeignKey("environment.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("tag", String(), primary_key=True, index=True),
)

# SQLite: an FTS5 index of the listed (not removed) environments, read from a view over the
# environment table and kept in step by triggers. Each tag is also indexed whole in
# `tag_keys`, as one token no other tag shares ('t' + the hex of its UTF-8 bytes + 'x', which
# no stemming rule touches; catalog.search.tag_key writes the same), so a tag filter is a term
# of the MATCH. Column weights for bm25: a word in the title counts most, one in the README
# least, a tag key nothing. Prefix indexes because search-as-you-type makes the last word a
# prefix.
FTS_VERSION = 4  # kept in PRAGMA user_version by databases made before Alembic
_FTS_COLUMNS = "title, description, tags, author, readme, tag_keys"


def _tag_keys(row: str) -> str:
    tags = f"CASE WHEN json_valid({row}.tags) THEN {row}.tags END"
    return f"(SELECT group_concat('t' || lower(hex(value)) || 'x', ' ') FROM json_each({tags}))"  # noqa: S608


def _fts_values(row: str) -> str:
    return f"{row}.rowid, {row}.title, {row}.description, {row}.tags, {row}.author, {row}.readme, {_tag_keys(row)}"


_FTS_SOURCE = f"""CREATE VIEW environment_fts_source AS
    SELECT rowid AS source_rowid, title, description, tags, author, readme, {_tag_keys("environment")} AS tag_keys
    FROM environment WHERE removed_at IS NULL"""  # noqa: S608
_FTS_TABLE = f"""CREATE VIRTUAL TABLE environment_fts USING fts5(
    {_FTS_COLUMNS}, content='environment_fts_source', content_rowid='source_rowid',
    tokenize='porter unicode61 remove_diacritics 2', prefix='2 3 4 5 6 7 8')"""
_FTS_TRIGGERS = [
    f"""CREATE TRIGGER environment_fts_insert AFTER INSERT ON environment
    WHEN new.removed_at IS NULL BEGIN
        INSERT INTO environment_fts(rowid, {_FTS_COLUMNS}) VALUES ({_fts_values("new")});
    END""",  # noqa: S608
    f"""CREATE TRIGGER environment_fts_delete AFTER DELETE ON environment
    WHEN old.removed_at IS NULL BEGIN
        INSERT INTO environment_fts(environment_fts, rowid, {_FTS_COLUMNS}) VALUES ('delete', {_fts_values("old")});
    END""",  # noqa: S608
    # One trigger for both halves of an update, so the old entry always goes before the new one.
    f"""CREATE TRIGGER environment_fts_update
    AFTER UPDATE OF title, description, tags, author, readme, removed_at ON environment BEGIN
        INSERT INTO environment_fts(environment_fts, rowid, {_FTS_COLUMNS})
        SELECT 'delete', {_fts_values("old")} WHERE old.removed_at IS NULL;
        INSERT INTO environment_fts(rowid, {_FTS_COLUMNS})
        SELECT {_fts_values("new")} WHERE new.removed_at IS NULL;
    END""",
]
_FTS_DROP = [
    "DROP TRIGGER IF EXISTS environment_fts_insert",
    "DROP TRIGGER IF EXISTS environment_fts_delete",
    "DROP TRIGGER IF EXISTS environment_fts_update",
    "DROP TABLE IF EXISTS environment_fts",
    "DROP VIEW IF EXISTS environment_fts_source",
]
_FTS_BUILD = [
    *_FTS_DROP,
    _FTS_SOURCE,
    _FTS_TABLE,
    # Not the 'rebuild' command: FTS5 cannot run json_each from within its own content read.
    f"INSERT INTO environment_fts(rowid, {_FTS_COLUMNS}) SELECT * FROM environment_fts_source",  # noqa: S608
    *_FTS_TRIGGERS,
    "INSERT INTO environment_fts(environment_fts, rank) VALUES ('rank', 'bm25(10.0, 4.0, 6.0, 3.0, 1.0, 0.0)')",
    f"PRAGMA user_version = {FTS_VERSION}",
]

# Postgres: a stored tsvector with the weights of the bm25 above (A title; B tags and
# description; C author; D README), a GIN index on it holding listed environments only
# (words only ever match those, as on SQLite), and a GIN index on the JSONB tags for the
# tag filter. The README is cut because a tsvector holds at most 1 MB.
_PG_SEARCH = """ALTER TABLE environment ADD COLUMN IF NOT EXISTS search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english'::regconfig, coalesce(title, '')), 'A')
    || setweight(to_tsvector('english'::regconfig, coalesce(tags, '[]'::jsonb)), 'B')
    || setweight(to_tsvector('english'::regconfig, coalesce(description, '')), 'B')
    || setweight(to_tsvector('english'::regconfig, coalesce(author, '')), 'C')
    || setweight(to_tsvector('english'::regconfig, left(coalesce(readme, ''), 200000)), 'D')
) STORED"""
_PG_INDEXES = [
    "CREATE INDEX IF NOT EXISTS ix_environment_search ON environment USING gin (search) WHERE removed_at IS NULL",
    "CREATE INDEX IF NOT EXISTS ix_environment_tags ON environment USING gin (tags jsonb_path_ops)",
]


def _add_missing_columns(bind: sa.Connection) -> None:
    """Columns added to a table after its database was made (all nullable): ALTER TABLE ADD COLUMN."""
    existing = sa.inspect(bind)
    for table in schema.sorted_tables:
        present = {c["name"] for c in existing.get_columns(table.name)}
        for column in table.columns:
            if column.name not in present and column.nullable:
                op.add_column(table.name, sa.Column(column.name, column.type, nullable=True))


def upgrade() -> None:
    bind = op.get_bind()
    existing = set(sa.inspect(bind).get_table_names())
    adopted = schema.tables.keys() & existing
    if adopted:
        _add_missing_columns(bind)
    # Creates missing tables with their indexes, and the indexes a database made before
    # Alembic lacks on columns added to it later.
    schema.create_all(bind, checkfirst=True)
    for table in schema.sorted_tables:
        if table.name in adopted:
            for index in table.indexes:
                index.create(bind, checkfirst=True)
    if bind.dialect.name == "sqlite":
        if bind.exec_driver_sql("PRAGMA user_version").scalar_one() < FTS_VERSION:
            for statement in _FTS_BUILD:
                op.execute(statement)
    elif bind.dialect.name == "postgresql":
        tags = {c["name"]: c["type"] for c in sa.inspect(bind).get_columns("environment")}["tags"]
        if not isinstance(tags, postgresql.JSONB):  # a catalog made by create_all before JSONB
            op.execute("ALTER TABLE environment ALTER COLUMN tags TYPE jsonb USING tags::jsonb")
        op.execute(_PG_SEARCH)
        for statement in _PG_INDEXES:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in _FTS_DROP:
            op.execute(statement)
    schema.drop_all(op.get_bind())
