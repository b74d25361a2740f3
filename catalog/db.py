"""Database engine, schema and the full-text index (FTS5 on SQLite)."""

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event, inspect, make_url, text
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, SQLModel, create_engine

from catalog import models  # noqa: F401  (registers the tables on SQLModel.metadata)

# The full-text index holds the listed (not removed) environments, read from a view over the
# environment table and kept in step by triggers, so counting matches needs no join. Each tag
# is also indexed whole in `tag_keys`, as one token that no other tag shares ('t' + the hex of
# its UTF-8 bytes + 'x', which no stemming rule touches): a tag filter is then a term of the
# MATCH and needs no check row by row. Column weights for bm25: a word in the title counts
# most, one in the README least, a tag key nothing.
FTS_VERSION = 4  # kept in PRAGMA user_version; an older index is rebuilt at start-up
FTS_COLUMNS = "title, description, tags, author, readme, tag_keys"


def tag_key(tag: str) -> str:
    """The single token that stands for one whole tag in the full-text index."""
    return f"t{tag.encode().hex()}x"


def _tag_keys(row: str) -> str:
    tags = f"CASE WHEN json_valid({row}.tags) THEN {row}.tags END"
    return f"(SELECT group_concat('t' || lower(hex(value)) || 'x', ' ') FROM json_each({tags}))"  # noqa: S608


def _fts_values(row: str) -> str:
    return f"{row}.rowid, {row}.title, {row}.description, {row}.tags, {row}.author, {row}.readme, {_tag_keys(row)}"


_FTS_SOURCE = f"""CREATE VIEW IF NOT EXISTS environment_fts_source AS
    SELECT rowid AS source_rowid, title, description, tags, author, readme, {_tag_keys("environment")} AS tag_keys
    FROM environment WHERE removed_at IS NULL"""  # noqa: S608
# Prefix indexes: search-as-you-type makes the last word a prefix, and without them FTS5
# merges the doclists of every word sharing it on each lookup.
_FTS_TABLE = f"""CREATE VIRTUAL TABLE IF NOT EXISTS environment_fts USING fts5(
    {FTS_COLUMNS}, content='environment_fts_source', content_rowid='source_rowid',
    tokenize='porter unicode61 remove_diacritics 2', prefix='2 3 4 5 6 7 8')"""
_FTS_TRIGGERS = [
    f"""CREATE TRIGGER environment_fts_insert AFTER INSERT ON environment
    WHEN new.removed_at IS NULL BEGIN
        INSERT INTO environment_fts(rowid, {FTS_COLUMNS}) VALUES ({_fts_values("new")});
    END""",  # noqa: S608
    f"""CREATE TRIGGER environment_fts_delete AFTER DELETE ON environment
    WHEN old.removed_at IS NULL BEGIN
        INSERT INTO environment_fts(environment_fts, rowid, {FTS_COLUMNS}) VALUES ('delete', {_fts_values("old")});
    END""",  # noqa: S608
    # One trigger for both halves of an update, so the old entry always goes before the new one.
    f"""CREATE TRIGGER environment_fts_update
    AFTER UPDATE OF title, description, tags, author, readme, removed_at ON environment BEGIN
        INSERT INTO environment_fts(environment_fts, rowid, {FTS_COLUMNS})
        SELECT 'delete', {_fts_values("old")} WHERE old.removed_at IS NULL;
        INSERT INTO environment_fts(rowid, {FTS_COLUMNS})
        SELECT {_fts_values("new")} WHERE new.removed_at IS NULL;
    END""",
]
_FTS_REBUILD = [
    "DROP TRIGGER IF EXISTS environment_fts_insert",
    "DROP TRIGGER IF EXISTS environment_fts_delete",
    "DROP TRIGGER IF EXISTS environment_fts_update",
    "DROP TABLE IF EXISTS environment_fts",
    "DROP VIEW IF EXISTS environment_fts_source",
    _FTS_SOURCE,
    _FTS_TABLE,
    # Not the 'rebuild' command: FTS5 cannot run json_each from within its own content read.
    f"INSERT INTO environment_fts(rowid, {FTS_COLUMNS}) SELECT * FROM environment_fts_source",  # noqa: S608
    *_FTS_TRIGGERS,
    "INSERT INTO environment_fts(environment_fts, rank) VALUES ('rank', 'bm25(10.0, 4.0, 6.0, 3.0, 1.0, 0.0)')",
    f"PRAGMA user_version = {FTS_VERSION}",
]


def _json_dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _sqlite_pragmas(dbapi_connection: sqlite3.Connection, _record: object) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def create_db_engine(url: str) -> Engine:
    """An engine for any SQLAlchemy URL; SQLite files get their folder, WAL and FTS5."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, json_serializer=_json_dumps, pool_pre_ping=True)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, json_serializer=_json_dumps, connect_args={"check_same_thread": False})
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def _add_missing_columns(engine: Engine) -> None:
    """Columns added to a table since its database was created (all nullable): ALTER TABLE ADD COLUMN."""
    existing = inspect(engine)
    with engine.begin() as conn:
        for table in SQLModel.metadata.sorted_tables:
            if not existing.has_table(table.name):
                continue
            present = {c["name"] for c in existing.get_columns(table.name)}
            for column in table.columns:
                if column.name not in present and column.nullable:
                    kind = column.type.compile(dialect=engine.dialect)
                    conn.execute(text(f'ALTER TABLE "{table.name}" ADD COLUMN "{column.name}" {kind}'))


def init_db(engine: Engine) -> None:
    """Create missing tables and columns and, on SQLite, the full-text index and its triggers."""
    _add_missing_columns(engine)
    SQLModel.metadata.create_all(engine)
    if is_sqlite(engine):
        with engine.begin() as conn:
            conn.execute(text(_FTS_SOURCE))
            conn.execute(text(_FTS_TABLE))
            if conn.execute(text("PRAGMA user_version")).scalar_one() < FTS_VERSION:
                for statement in _FTS_REBUILD:
                    conn.execute(text(statement))


def upsert(session: Session, table: type[SQLModel], rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows, or update every given column of rows whose primary key exists."""
    if not rows:
        return
    sa_table = table.__table__  # type: ignore[attr-defined]
    insert = sqlite_insert if session.get_bind().dialect.name == "sqlite" else postgresql_insert
    keys = [c.name for c in sa_table.primary_key.columns]
    statement = insert(sa_table)
    columns = [c for c in rows[0] if c not in keys]
    if columns:
        statement = statement.on_conflict_do_update(
            index_elements=keys, set_={c: statement.excluded[c] for c in columns}
        )
    else:
        statement = statement.on_conflict_do_nothing(index_elements=keys)
    session.execute(statement, list(rows))
