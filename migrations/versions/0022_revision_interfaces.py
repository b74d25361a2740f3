"""What a template's app said of itself, kept with the revision it was read at (`environmentrevision.interface`): a
start that lists that revision again shows its schemas at once, and one that lists another reads them anew.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-09
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | Sequence[str] | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A catalog made before migrations was created from today's models, with the column already there.
    if "interface" not in {c["name"] for c in sa.inspect(op.get_bind()).get_columns("environmentrevision")}:
        op.add_column("environmentrevision", sa.Column("interface", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("environmentrevision") as revisions:
        revisions.drop_column("interface")
