"""Replicas sharing one database: leases, and which replica runs each sync and manages each endpoint.

`lease` holds one row per named right (the background sync, the health rounds, a sync
running now, and each live replica's own); `syncrun.replica` says which replica ran a
sync, so that a replica starting up closes only the runs of replicas that are gone;
`endpoint.replica` says which replica manages an endpoint (its server runs there) and
`endpoint.last_active_at` when any replica's gateway last carried its traffic.

A catalog made by the models before this revision may have them already; they are kept.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String
from sqlmodel.sql.sqltypes import UTCDateTime as Time

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _columns() -> list[tuple[str, sa.Column[Any]]]:
    """New each time: a column joins the table it is added to."""
    return [
        ("syncrun", sa.Column("replica", String(), nullable=True)),
        ("endpoint", sa.Column("replica", String(), nullable=True)),
        ("endpoint", sa.Column("last_active_at", Time(), nullable=True)),
    ]


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table("lease"):
        op.create_table(
            "lease",
            sa.Column("name", String(), primary_key=True),
            sa.Column("holder", String(), nullable=False),
            sa.Column("expires_at", Time(), nullable=False),
        )
        op.create_index("ix_lease_expires_at", "lease", ["expires_at"])
    for table, column in _columns():
        if column.name not in {c["name"] for c in inspector.get_columns(table)}:
            op.add_column(table, column)
    if "ix_endpoint_replica" not in {i["name"] for i in inspector.get_indexes("endpoint")}:
        op.create_index("ix_endpoint_replica", "endpoint", ["replica"])


def downgrade() -> None:
    op.drop_index("ix_endpoint_replica", table_name="endpoint")
    with op.batch_alter_table("endpoint") as endpoint:
        endpoint.drop_column("last_active_at")
        endpoint.drop_column("replica")
    with op.batch_alter_table("syncrun") as syncrun:
        syncrun.drop_column("replica")
    op.drop_index("ix_lease_expires_at", table_name="lease")
    op.drop_table("lease")
