"""Difficulty per task: what a statistical report measured of each task it played (pass@k, mean reward and its
standard error, P(signal)), for the model it ran.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-10
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String
from sqlmodel.sql.sqltypes import UTCDateTime as Time

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "taskdifficulty",
        sa.Column("report", sa.Integer(), nullable=False),
        sa.Column("task", String(), nullable=False),
        sa.Column("environment", String(), nullable=False),
        sa.Column("revision", String(), nullable=True),
        sa.Column("player", String(), nullable=False),
        sa.Column("evaluation", String(), nullable=False),
        sa.Column("reset", sa.JSON(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("passes", sa.Integer(), nullable=False),
        sa.Column("pass_at_k", sa.Float(), nullable=True),
        sa.Column("k", sa.Integer(), nullable=False),
        sa.Column("mean_reward", sa.Float(), nullable=True),
        sa.Column("se", sa.Float(), nullable=True),
        sa.Column("p_signal", sa.Float(), nullable=False),
        sa.Column("p_signal_low", sa.Float(), nullable=False),
        sa.Column("p_signal_high", sa.Float(), nullable=False),
        sa.Column("group_size", sa.Integer(), nullable=False),
        sa.Column("created_at", Time(), nullable=False),
        sa.PrimaryKeyConstraint("report", "task"),
    )
    op.create_index("ix_taskdifficulty_environment", "taskdifficulty", ["environment"])


def downgrade() -> None:
    op.drop_index("ix_taskdifficulty_environment", table_name="taskdifficulty")
    op.drop_table("taskdifficulty")
