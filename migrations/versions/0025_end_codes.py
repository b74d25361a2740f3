"""End codes: why a run failed, why an episode ended before done and why an agent session ended, as a code beside
the message (`evaluation.code`, `episode.code`, `agentsession.code`). Rows recorded before this have none.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String

revision: str = "0025"
down_revision: str | Sequence[str] | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES = ("evaluation", "episode", "agentsession")


def upgrade() -> None:
    for table in _TABLES:
        op.add_column(table, sa.Column("code", String(), nullable=False, server_default=""))


def downgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("code")
