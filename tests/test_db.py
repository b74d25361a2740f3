"""Schema migrations: a new catalog, one made before migrations, repeated and concurrent start-ups, a renaming."""

import threading
import time
from datetime import timedelta

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, MetaData, inspect, text
from sqlmodel import Session, SQLModel, select

from catalog.models import Environment, SyncRun
from core.clock import utcnow
from core.db import MIGRATION_LOCK, compared_with_models, create_db_engine, exclusive, init_db, migration_config
from core.leases import INSTANCE_PREFIX, Lease
from evals.models import AgentSession, Evaluation
from hosting.models import Backend, Endpoint

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
    with exclusive(engine, MIGRATION_LOCK):  # as an instance migrating, or on SQLite any writer, would
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
    """A catalog as envhub made it before Alembic: create_all without the columns added since, an older FTS5 index."""
    before = MetaData()  # create_all would make every enum type of the models' metadata
    for name in TABLES_BEFORE_MIGRATIONS:
        SQLModel.metadata.tables[name].to_metadata(before)
    before.create_all(engine)
    with engine.begin() as connection:
        connection.execute(text("ALTER TABLE environment DROP COLUMN conformance"))
        connection.execute(text("DROP INDEX ix_endpoint_instance"))  # 0004 adds it as `replica`, 0013 renames it
        for table in ("endpoint", "syncrun"):
            connection.execute(text(f"ALTER TABLE {table} DROP COLUMN instance"))
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


def test_instances_starting_at_once_migrate_once(database_url: str) -> None:
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


def test_migration_0013_renames_the_envhub_process_columns_to_instance_with_their_values(database_url: str) -> None:
    engine = create_db_engine(database_url)
    init_db(engine)
    gone, later = "gonehost-1-abcdef", utcnow() + timedelta(hours=1)
    with Session(engine) as session:
        session.add(SyncRun(instance=gone))
        session.add(Endpoint(id="ep", environment="template:count", backend=Backend.PROCESS, instance=gone))
        session.add(
            Evaluation(
                id="ev",
                environment="template:count",
                policy_label="random",
                taskset_label="seeds",
                episodes_planned=1,
                concurrency=1,
                instance=gone,
            )
        )
        session.add(AgentSession(id="as", endpoint="ep", environment="template:count", instance=gone))
        session.add(Lease(name=INSTANCE_PREFIX + gone, holder=gone, expires_at=later))
        session.add(Lease(name="sync", holder=gone, expires_at=later))
        session.commit()

    def state(column: str) -> tuple[set[str], dict[str, list[str]], list[str]]:
        """Each table's values of the column, the endpoint's indexes, the leases' names."""
        with engine.connect() as connection:
            tables = ("syncrun", "endpoint", "evaluation", "agentsession")
            values = {connection.execute(text(f"SELECT {column} FROM {t}")).scalar_one() for t in tables}
            leases = sorted(connection.execute(text("SELECT name FROM lease")).scalars())
        indexes = {str(i["name"]): [str(c) for c in i["column_names"]] for i in inspect(engine).get_indexes("endpoint")}
        return values, indexes, leases

    try:
        with exclusive(engine, MIGRATION_LOCK) as connection:
            command.downgrade(migration_config(connection), "0012")
        values, indexes, leases = state("replica")
        assert (values, indexes["ix_endpoint_replica"], leases) == ({gone}, ["replica"], ["sync"])
        with Session(engine) as session:  # as a process before 0013 said it was alive
            session.add(Lease(name=f"replica:{gone}", holder=gone, expires_at=later))
            session.commit()

        init_db(engine)

        values, indexes, leases = state("instance")
        assert (values, indexes["ix_endpoint_instance"], leases) == ({gone}, ["instance"], ["sync"])
        assert "ix_endpoint_replica" not in indexes
    finally:
        engine.dispose()


def test_migration_0016_marks_the_runs_on_record_of_a_private_endpoint_private(database_url: str) -> None:
    engine = create_db_engine(database_url)
    init_db(engine)
    with Session(engine) as session:
        for endpoint_id, private in (("mine", True), ("ours", False)):
            options = {"private": private}
            session.add(Endpoint(id=endpoint_id, environment="template:count", backend=Backend.PROCESS, owner="victim",
                                 options=options))  # fmt: skip
            session.add(
                Evaluation(
                    id=f"ev-{endpoint_id}",
                    environment="template:count",
                    endpoint=endpoint_id,
                    policy_label="random",
                    taskset_label="seeds",
                    episodes_planned=1,
                    concurrency=1,
                )
            )
        session.commit()
    try:
        with exclusive(engine, MIGRATION_LOCK) as connection:
            command.downgrade(migration_config(connection), "0015")

        init_db(engine)

        with Session(engine) as session:
            runs = {run.id: (run.private, run.endpoint_owner) for run in session.exec(select(Evaluation))}
        assert runs == {"ev-mine": (True, "victim"), "ev-ours": (False, None)}
    finally:
        engine.dispose()
