"""Endpoints launched from the Play tab are marked (`endpoint.for_play`): they stop after the shorter idle time of
play (ENVHUB_PLAY_IDLE_S).

Endpoints launched before this count as launched elsewhere.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-09
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | Sequence[str] | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A catalog made before migrations was created from today's models, with the column already there.
    if "for_play" not in {c["name"] for c in sa.inspect(op.get_bind()).get_columns("endpoint")}:
        op.add_column("endpoint", sa.Column("for_play", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("endpoint") as endpoints:
        endpoints.drop_column("for_play")
