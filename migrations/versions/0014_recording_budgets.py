"""Recording budgets: an agent session's episodes count against its own and its client's budgets, so each episode
keeps its size, each session whose client it counts against (`holder`: user:<name> or address:<ip>) and how many
of its episodes were let go.

Sessions recorded before this share the empty holder's budget; their episodes' sizes count as 0 until written again.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("episode", sa.Column("size", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("agentsession", sa.Column("dropped", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("agentsession", sa.Column("holder", String(), nullable=False, server_default=""))
    op.create_index("ix_agentsession_holder", "agentsession", ["holder"])


def downgrade() -> None:
    op.drop_index("ix_agentsession_holder", table_name="agentsession")
    with op.batch_alter_table("agentsession") as sessions:
        sessions.drop_column("holder")
        sessions.drop_column("dropped")
    with op.batch_alter_table("episode") as episodes:
        episodes.drop_column("size")
