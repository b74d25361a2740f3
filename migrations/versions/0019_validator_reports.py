"""Reports of openenv's own validator are check reports too (suites `openenv` and `openenv-url`), each naming the
program and version that made it: `checkreport.tool`, e.g. "openenv 0.10.0".

Reports filed before this name none.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A catalog made before migrations was created from today's models, with the column already there.
    if "tool" not in {c["name"] for c in sa.inspect(op.get_bind()).get_columns("checkreport")}:
        op.add_column("checkreport", sa.Column("tool", String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("checkreport") as reports:
        reports.drop_column("tool")
