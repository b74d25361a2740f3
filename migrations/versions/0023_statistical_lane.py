"""The statistical lane: each task's difficulty as a statistical report measured it (pass@k, mean reward and its
standard error, P(signal)) for the model it ran, in `taskdifficulty`; and `evaluation.statistical_report`, the report
(checkreport id) whose reference player, adversarial panel member or replay a run is: such runs stay off the
leaderboards. Runs recorded before this belong to no report.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String
from sqlmodel.sql.sqltypes import UTCDateTime as Time

revision: str = "0023"
down_revision: str | Sequence[str] | None = "0022"
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
    op.add_column("evaluation", sa.Column("statistical_report", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("evaluation") as evaluations:
        evaluations.drop_column("statistical_report")
    op.drop_index("ix_taskdifficulty_environment", table_name="taskdifficulty")
    op.drop_table("taskdifficulty")
