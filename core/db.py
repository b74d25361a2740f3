"""Database engine, schema migrations and upserts, on SQLite or Postgres."""

import json
import random
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from pydantic import BaseModel
from sqlalchemy import JSON, Connection, Dialect, Engine, event, make_url, text
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.schema import SchemaItem
from sqlalchemy.types import TypeDecorator
from sqlmodel import Session, SQLModel, create_engine

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"  # the revisions of every package's tables
_BUSY_TIMEOUT_S = 10  # how long a SQLite writer waits for another's lock
# Keys of Postgres advisory locks, constants shared by every envhub process (see exclusive).
MIGRATION_LOCK = 0x656E76687562  # "envhub": one instance at a time migrates the schema


def _json_dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _sqlite_pragmas(dbapi_connection: sqlite3.Connection, _record: object) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_S * 1000}")
    _switch_to_wal(cursor)
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _switch_to_wal(cursor: sqlite3.Cursor) -> None:
    """WAL mode, also when several processes open a new file at once.

    Two connections that both read the file and then both ask for the exclusive lock the
    switch needs would wait for each other, so SQLite fails one at once ("database is
    locked") instead of calling its busy handler: that one tries again, within the busy timeout.
    """
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.005, 0.05))


def create_db_engine(url: str) -> Engine:
    """An engine for a SQLite or Postgres URL; SQLite files get their folder and WAL."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, json_serializer=_json_dumps, pool_pre_ping=True)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, json_serializer=_json_dumps, connect_args={"check_same_thread": False})
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


class ModelJSON(TypeDecorator[Any]):
    """A JSON column holding one pydantic model: written as its JSON, read back as the model."""

    impl = JSON
    cache_ok = True

    def __init__(self, model: type[BaseModel]) -> None:
        super().__init__()
        self.model = model

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return value.model_dump(mode="json") if isinstance(value, BaseModel) else value

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        return None if value is None else self.model.model_validate(value)


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


# Full-text objects that only the revisions know: the SQLite FTS5 table (and its shadow
# tables) and the Postgres tsvector column and GIN indexes. Comparing the models with a
# database (autogenerate) must neither drop them nor ask for them.
_FULL_TEXT_OBJECTS = frozenset({"search", "ix_environment_search", "ix_environment_tags"})


def compared_with_models(item: SchemaItem, name: str | None, kind: str, reflected: bool, compare_to: object) -> bool:
    """Alembic's include_object: whether a table, column or index is one the models describe."""
    return name not in _FULL_TEXT_OBJECTS and not (name or "").startswith("environment_fts")


def migration_config(connection: Connection) -> Config:
    """Alembic's configuration, built here so that no alembic.ini or working directory matters."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


@contextmanager
def exclusive(engine: Engine, key: int) -> Iterator[Connection]:
    """A connection in a transaction that no other process asking for the same key shares, committed at the end.

    On Postgres an advisory lock on the key, released at commit or rollback; on SQLite the
    database's write lock (BEGIN IMMEDIATE), whatever the key.
    """
    with engine.connect() as connection:
        if not is_sqlite(engine):
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
            yield connection
            connection.commit()
            return
        # pysqlite opens transactions only for DML: take the write lock ourselves, so that a
        # second process waits (busy_timeout) instead of reading a schema being changed.
        connection = connection.execution_options(isolation_level="AUTOCOMMIT")
        connection.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            yield connection
        except BaseException:
            connection.exec_driver_sql("ROLLBACK")
            raise
        connection.exec_driver_sql("COMMIT")


def init_db(engine: Engine) -> None:
    """Bring the schema to the newest revision, one process at a time.

    A new database gets every table and the full-text index (FTS5 on SQLite, a tsvector
    column and GIN indexes on Postgres); one made before migrations is adopted in place.
    """
    with engine.connect() as connection:
        config = migration_config(connection)
        current = set(MigrationContext.configure(connection).get_current_heads())
        if current == set(ScriptDirectory.from_config(config).get_heads()):
            return  # up to date: no lock, so a start-up never waits for a long sync's writes
    with exclusive(engine, MIGRATION_LOCK) as connection:  # Postgres runs each revision's DDL in it
        command.upgrade(migration_config(connection), "head")


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
