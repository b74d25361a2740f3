"""Alembic's entry point: runs the revisions of every package's tables on the connection core.db hands it."""

from alembic import context
from sqlalchemy import Connection, create_engine
from sqlmodel import SQLModel

# Every package's tables, registered on SQLModel.metadata.
import app.auth.sign_in_sessions  # noqa: F401
import catalog.models
import catalog.revisions
import catalog.submissions  # noqa: F401
import conformance.models
import conformance.statistical.models  # noqa: F401
import core.leases  # noqa: F401
import evals.models  # noqa: F401
import hosting.models  # noqa: F401
from core.db import compared_with_models


def run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=SQLModel.metadata,
        include_object=compared_with_models,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    run(connection)
else:  # the alembic command line, to write a new revision: see README.md
    url = context.get_x_argument(as_dictionary=True).get("url")
    if not url:
        raise SystemExit("name the database: alembic -x url=sqlite:///data/envhub.db ...")
    with create_engine(url).connect() as standalone:
        run(standalone)
