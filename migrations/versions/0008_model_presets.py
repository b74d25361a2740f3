"""Model presets: a model saved under a name by its owner, its API key sealed.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String
from sqlmodel.sql.sqltypes import UTCDateTime as Time

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "modelpreset",
        sa.Column("owner", String(), primary_key=True),
        sa.Column("name", String(), primary_key=True),
        sa.Column("base_url", String(), nullable=False),
        sa.Column("model", String(), nullable=False),
        sa.Column("temperature", sa.Float(), nullable=True),
        sa.Column("top_p", sa.Float(), nullable=True),
        sa.Column("max_tokens", sa.Integer(), nullable=True),
        sa.Column("seed", sa.BigInteger(), nullable=True),
        sa.Column("timeout_s", sa.Float(), nullable=False),
        sa.Column("system_prompt", String(), nullable=True),
        sa.Column("updated_at", Time(), nullable=False),
        sa.Column("api_key_sealed", String(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("modelpreset")
