"""Private evaluations: a run played on a private endpoint is its endpoint owner's and the admin's only.

`evaluation.private` says the run's endpoint was private when it started, and `evaluation.endpoint_owner`
who owned it; both are kept whatever becomes of the endpoint. The runs already on record are marked from
their endpoints' rows, which envhub never deletes.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("evaluation") as batch:
        batch.add_column(sa.Column("private", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("endpoint_owner", String(), nullable=True))
    bind = op.get_bind()
    endpoints = bind.execute(sa.text("SELECT id, owner, options FROM endpoint")).all()
    for endpoint_id, owner, options in endpoints:
        # The options are JSON, read back as text or as a dict depending on the database.
        if (json.loads(options) if isinstance(options, str) else options or {}).get("private") is True:
            bind.execute(
                sa.text("UPDATE evaluation SET private = :private, endpoint_owner = :owner WHERE endpoint = :id"),
                {"private": True, "owner": owner, "id": endpoint_id},
            )


def downgrade() -> None:
    with op.batch_alter_table("evaluation") as batch:
        batch.drop_column("endpoint_owner")
        batch.drop_column("private")
