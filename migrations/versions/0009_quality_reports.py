"""Quality reports: filed beside the protocol checks, and the last one's summary on the environment.

`checkreport.suite` says which suite a report is of ("protocol", the default, or "quality") and
`checkreport.verdict` its verdict (pass, warn, fail; a protocol check passes when it conforms, so the
rows before this revision get pass or fail). `environment.quality` holds the summary of the last
quality report; on Postgres it stays in the row (storage MAIN) like the other columns filters read.

A catalog made by the models before this revision may have them already; they are kept.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-09
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _columns() -> list[tuple[str, sa.Column[Any]]]:
    """New each time: a column joins the table it is added to."""
    return [
        ("checkreport", sa.Column("suite", String(), nullable=False, server_default="protocol")),
        ("checkreport", sa.Column("verdict", String(), nullable=True)),
        ("environment", sa.Column("quality", sa.JSON(), nullable=True)),
    ]


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    added = set()
    for table, column in _columns():
        if column.name not in {c["name"] for c in inspector.get_columns(table)}:
            op.add_column(table, column)
            added.add(column.name)
    if "ix_checkreport_suite" not in {i["name"] for i in inspector.get_indexes("checkreport")}:
        op.create_index("ix_checkreport_suite", "checkreport", ["suite"])
    if "verdict" in added:
        op.execute("UPDATE checkreport SET verdict = CASE WHEN conforms THEN 'pass' ELSE 'fail' END")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE environment ALTER COLUMN quality SET STORAGE MAIN")


def downgrade() -> None:
    with op.batch_alter_table("environment") as environment:
        environment.drop_column("quality")
    op.drop_index("ix_checkreport_suite", table_name="checkreport")
    with op.batch_alter_table("checkreport") as checkreport:
        checkreport.drop_column("verdict")
        checkreport.drop_column("suite")
