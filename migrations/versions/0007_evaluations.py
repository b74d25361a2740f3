"""Evaluations: each run of a policy over an environment's episodes, and its episodes with every step.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String
from sqlmodel.sql.sqltypes import UTCDateTime as Time

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STATUS = sa.Enum("QUEUED", "RUNNING", "FINISHED", "CANCELLED", "FAILED", "INTERRUPTED", name="evaluationstatus")


def upgrade() -> None:
    op.create_table(
        "evaluation",
        sa.Column("id", String(), primary_key=True),
        sa.Column("environment", String(), nullable=False),
        sa.Column("revision", String(), nullable=True),
        sa.Column("endpoint", String(), nullable=True),
        sa.Column("launched", sa.Boolean(), nullable=False),
        sa.Column("policy", sa.JSON(), nullable=False),
        sa.Column("policy_label", String(), nullable=False),
        sa.Column("taskset", sa.JSON(), nullable=False),
        sa.Column("taskset_label", String(), nullable=False),
        sa.Column("episodes_planned", sa.Integer(), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("limits", sa.JSON(), nullable=False),
        sa.Column("status", _STATUS, nullable=False),
        sa.Column("message", String(), nullable=False),
        sa.Column("owner", String(), nullable=True),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("created_at", Time(), nullable=False),
        sa.Column("started_at", Time(), nullable=True),
        sa.Column("finished_at", Time(), nullable=True),
        sa.Column("replica", String(), nullable=False),
    )
    for column in ("environment", "owner", "policy_label", "status"):
        op.create_index(f"ix_evaluation_{column}", "evaluation", [column])
    op.create_table(
        "episode",
        sa.Column("id", String(), primary_key=True),
        sa.Column("evaluation", String(), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=True),
        sa.Column("task", sa.JSON(), nullable=True),
        sa.Column("status", String(), nullable=False),
        sa.Column("error", String(), nullable=True),
        sa.Column("reward", sa.Float(), nullable=False),
        sa.Column("final_reward", sa.Float(), nullable=True),
        sa.Column("success", sa.Boolean(), nullable=True),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("invalid", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("wall_s", sa.Float(), nullable=False),
        sa.Column("finished_at", Time(), nullable=False),
        sa.Column("records", sa.JSON(), nullable=False),
    )
    op.create_index("ix_episode_evaluation", "episode", ["evaluation"])


def downgrade() -> None:
    op.drop_table("episode")
    op.drop_table("evaluation")
    if op.get_bind().dialect.name == "postgresql":
        _STATUS.drop(op.get_bind(), checkfirst=True)
