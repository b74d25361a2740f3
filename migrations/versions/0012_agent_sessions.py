"""Agent sessions: the MCP sessions agent harnesses play through endpoints' MCP doors. Their episodes are rows of
the episode table, as a run's are, whose `evaluation` is the session's id.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-12
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String
from sqlmodel.sql.sqltypes import UTCDateTime as Time

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "agentsession",
        sa.Column("id", String(), primary_key=True),
        sa.Column("endpoint", String(), nullable=False),
        sa.Column("environment", String(), nullable=False),
        sa.Column("revision", String(), nullable=True),
        sa.Column("client", String(), nullable=False),
        sa.Column("protocol_version", String(), nullable=False),
        sa.Column("owner", String(), nullable=True),
        sa.Column("tools", sa.JSON(), nullable=False),
        sa.Column("status", String(), nullable=False),
        sa.Column("message", String(), nullable=False),
        sa.Column("episode_count", sa.Integer(), nullable=False),
        sa.Column("reward", sa.Float(), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("created_at", Time(), nullable=False),
        sa.Column("ended_at", Time(), nullable=True),
        sa.Column("replica", String(), nullable=False),
    )
    for column in ("endpoint", "environment"):
        op.create_index(f"ix_agentsession_{column}", "agentsession", [column])


def downgrade() -> None:
    op.drop_table("agentsession")
