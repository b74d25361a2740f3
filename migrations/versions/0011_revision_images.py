"""Revision images: the image digest envhub last ran of each revision (built from a template's folder or a Space's
commit, or pulled), kept with the revision in the catalog.

Revisions seen before this have none until an endpoint of theirs runs in a container. A catalog made by the
models before this revision may have the column already; it is kept.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-11
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("environmentrevision")}
    if "image_digest" not in columns:
        op.add_column("environmentrevision", sa.Column("image_digest", String(), nullable=True))
    op.execute(
        "UPDATE environmentrevision SET image_digest = (SELECT MAX(endpoint.image_digest) FROM endpoint "
        "WHERE endpoint.environment = environmentrevision.environment_id "
        "AND endpoint.revision = environmentrevision.revision) WHERE image_digest IS NULL"
    )


def downgrade() -> None:
    with op.batch_alter_table("environmentrevision") as revisions:
        revisions.drop_column("image_digest")
