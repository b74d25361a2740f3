"""Revisions: every revision the catalog has seen of an environment, and the one each endpoint serves (and,
for containers, the image they run).

`environmentrevision` starts with each environment's current sha. `endpoint.revision` and
`checkreport.revision` stay empty for rows made before this revision: which one they ran is not known.

A catalog made by the models before this revision may have them already; they are kept.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-10
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String
from sqlmodel.sql.sqltypes import UTCDateTime as Time

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table("environmentrevision"):
        op.create_table(
            "environmentrevision",
            sa.Column("environment_id", String(), primary_key=True),
            sa.Column("revision", String(), primary_key=True),
            sa.Column("committed_at", Time(), nullable=True),
            sa.Column("seen_at", Time(), nullable=False),
        )
        op.execute(
            "INSERT INTO environmentrevision (environment_id, revision, committed_at, seen_at) "
            "SELECT id, sha, last_modified, indexed_at FROM environment WHERE sha IS NOT NULL"
        )
    for table, column in (("endpoint", "revision"), ("endpoint", "image_digest"), ("checkreport", "revision")):
        if column not in {c["name"] for c in inspector.get_columns(table)}:
            op.add_column(table, sa.Column(column, String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("checkreport") as checkreport:
        checkreport.drop_column("revision")
    with op.batch_alter_table("endpoint") as endpoint:
        endpoint.drop_column("image_digest")
        endpoint.drop_column("revision")
    op.drop_table("environmentrevision")
