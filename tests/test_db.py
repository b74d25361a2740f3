"""Schema migrations: a new catalog, one made before migrations, repeated and concurrent start-ups."""

import threading
import time

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, MetaData, inspect, text
from sqlmodel import Session, SQLModel

from catalog.models import Environment
from core.db import MIGRATION_LOCK, compared_with_models, create_db_engine, exclusive, init_db, migration_config

pytestmark = pytest.mark.databases


def head(engine: Engine) -> str:
    with engine.connect() as connection:
        revision = ScriptDirectory.from_config(migration_config(connection)).get_current_head()
    assert revision is not None
    return revision


def revisions(engine: Engine) -> list[str]:
    with engine.connect() as connection:
        return list(connection.execute(text("SELECT version_num FROM alembic_version")).scalars())


def full_text_ids(engine: Engine, word: str) -> list[str]:
    """Ids the full-text index itself finds for a word, whatever the dialect."""
    if engine.dialect.name == "sqlite":
        sql = (
            "SELECT e.id FROM environment_fts f JOIN environment e ON e.rowid = f.rowid WHERE environment_fts MATCH :w"
        )
    else:
        sql = "SELECT id FROM environment WHERE search @@ to_tsquery('english', :w) AND removed_at IS NULL"
    with engine.connect() as connection:
        return sorted(connection.execute(text(sql), {"w": word}).scalars())


INSERT = """INSERT INTO environment (id, source, title, description, tags, likes, trending_score, problems,
    card, readme, indexed_at) VALUES (:id, 'HUB', :title, 'Play against a minimax opponent', :tags, 5, 0, '[]', '{}',
    '', '2026-01-01 00:00:00.000000')"""


def insert(engine: Engine, environment_id: str, title: str, tags: str = '["openenv", "game"]') -> None:
    with engine.begin() as connection:
        connection.execute(text(INSERT), {"id": environment_id, "title": title, "tags": tags})


def test_a_new_catalog_gets_the_newest_schema(database_url: str) -> None:
    engine = create_db_engine(database_url)
    init_db(engine)
    assert revisions(engine) == [head(engine)]
    insert(engine, "games/chess", "Chess")
    assert full_text_ids(engine, "chess") == ["games/chess"]
    if engine.dialect.name == "postgresql":
        with engine.connect() as connection:
            options = connection.execute(text("SELECT reloptions FROM pg_class WHERE oid = 'environment'::regclass"))
            assert options.scalar_one() == ["toast_tuple_target=256"]
    engine.dispose()


def test_the_revisions_build_what_the_models_describe(engine: Engine) -> None:
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"include_object": compared_with_models, "compare_type": True}
        )
        assert compare_metadata(context, SQLModel.metadata) == []


def test_starting_again_changes_nothing(engine: Engine) -> None:
    insert(engine, "games/chess", "Chess")
    init_db(engine)
    init_db(engine)
    assert revisions(engine) == [head(engine)]
    assert full_text_ids(engine, "chess") == ["games/chess"]


def test_an_up_to_date_catalog_starts_while_another_process_holds_the_lock(engine: Engine) -> None:
    with exclusive(engine, MIGRATION_LOCK):  # as a replica migrating, or on SQLite any writer, would
        started = time.monotonic()
        init_db(engine)
    assert time.monotonic() - started < 2


# The tables envhub had when migrations began; later revisions add the others.
TABLES_BEFORE_MIGRATIONS = (
    "checkreport",
    "dataset",
    "endpoint",
    "environment",
    "environmentdataset",
    "environmenttag",
    "syncrun",
)


def make_catalog_before_migrations(engine: Engine) -> None:
    """A catalog as envhub made it before Alembic: create_all, a column added since, an older FTS5 index."""
    before = MetaData()  # create_all would make every enum type of the models' metadata
    for name in TABLES_BEFORE_MIGRATIONS:
        SQLModel.metadata.tables[name].to_metadata(before)
    before.create_all(engine)
    with engine.begin() as connection:
        connection.execute(text("ALTER TABLE environment DROP COLUMN conformance"))
        if engine.dialect.name == "sqlite":
            connection.execute(
                text(
                    "CREATE VIRTUAL TABLE environment_fts USING fts5(title, description,"
                    " content='environment', content_rowid='rowid')"
                )
            )
            connection.execute(text("PRAGMA user_version = 2"))
        else:
            connection.execute(text("ALTER TABLE environment ALTER COLUMN tags TYPE json"))
    insert(engine, "games/chess", "Chess")
    insert(engine, "games/go", "Go", tags='["openenv"]')
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO environmenttag (environment_id, tag) VALUES ('games/chess', 'game')"))


def test_a_catalog_made_before_migrations_is_adopted_with_its_rows(database_url: str) -> None:
    engine = create_db_engine(database_url)
    make_catalog_before_migrations(engine)

    init_db(engine)

    assert revisions(engine) == [head(engine)]
    assert "conformance" in {c["name"] for c in inspect(engine).get_columns("environment")}
    with Session(engine) as session:
        chess = session.get(Environment, "games/chess")
        assert chess is not None
        assert (chess.title, chess.tags, chess.conformance) == ("Chess", ["openenv", "game"], None)
    assert full_text_ids(engine, "chess") == ["games/chess"]
    assert full_text_ids(engine, "minimax") == ["games/chess", "games/go"]  # the rebuilt index has every column
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            assert connection.execute(text("PRAGMA user_version")).scalar_one() == 4
    init_db(engine)
    assert revisions(engine) == [head(engine)]
    engine.dispose()


def test_replicas_starting_at_once_migrate_once(database_url: str) -> None:
    engines = [create_db_engine(database_url) for _ in range(3)]
    errors: list[BaseException] = []
    start = threading.Barrier(len(engines))

    def migrate(engine: Engine) -> None:
        start.wait()
        try:
            init_db(engine)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=migrate, args=(e,)) for e in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert revisions(engines[0]) == [head(engines[0])]
    for engine in engines:
        engine.dispose()
