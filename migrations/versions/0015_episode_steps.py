"""Episode steps: a run's episodes are stored step by step as they are played, one row a record, rather than whole
in the episode's row when it ends. Agent sessions' episodes keep their records in their row, and so do the episodes
stored before: they read as they did.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "episodestep",
        sa.Column("episode", String(), primary_key=True),
        sa.Column("index", sa.Integer(), primary_key=True),
        sa.Column("record", sa.JSON(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("episodestep")
