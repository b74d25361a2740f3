"""Status reasons: a stable code beside the message of an endpoint (`endpoint.reason`), of its pool's events
(`poolevent.reason`) and of a publication (`publication.reason`), for programs to read where people read the
message. Rows written before this carry none (an empty reason).

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String

revision: str = "0024"
down_revision: str | Sequence[str] | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("endpoint", "poolevent", "publication")


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for table in TABLES:
        # A catalog made before migrations got its tables from the models of today, the column with them.
        if "reason" not in {c["name"] for c in inspector.get_columns(table)}:
            op.add_column(table, sa.Column("reason", String(), nullable=False, server_default=""))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("reason")
