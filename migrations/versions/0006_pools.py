"""Pools: an endpoint's servers are its replicas, each with a row of its own, and the pool's events.

`replica` holds one row per server of an endpoint (its address, handle, host and what it
said it holds); `poolevent` the pool's growth, shrinking and replacements. The server of
each endpoint that ran before becomes its first replica, with its handle (whose key
`endpoint` is now `server`); `endpoint.internal_url` goes, and `endpoint.handle` is kept
for a service backend's service.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String
from sqlmodel.sql.sqltypes import UTCDateTime as Time

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STATUS = sa.Enum("STARTING", "READY", "DRAINING", "UNHEALTHY", "STOPPED", "FAILED", name="replicastatus")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TYPE backend ADD VALUE IF NOT EXISTS 'SWARM'")
    op.create_table(
        "replica",
        sa.Column("id", String(), primary_key=True),
        sa.Column("endpoint", String(), nullable=False),
        sa.Column("status", _STATUS, nullable=False),
        sa.Column("internal_url", String(), nullable=True),
        sa.Column("host", String(), nullable=False),
        sa.Column("handle", sa.JSON(), nullable=False),
        sa.Column("capacity", sa.Integer(), nullable=True),
        sa.Column("created_at", Time(), nullable=False),
        sa.Column("started_at", Time(), nullable=True),
        sa.Column("stopped_at", Time(), nullable=True),
        sa.Column("last_error", String(), nullable=False),
    )
    op.create_index("ix_replica_endpoint", "replica", ["endpoint"])
    op.create_index("ix_replica_status", "replica", ["status"])
    op.create_table(
        "poolevent",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("endpoint", String(), nullable=False),
        sa.Column("at", Time(), nullable=False),
        sa.Column("kind", String(), nullable=False),
        sa.Column("message", String(), nullable=False),
    )
    op.create_index("ix_poolevent_endpoint", "poolevent", ["endpoint"])
    bind = op.get_bind()
    rows = bind.execute(
        sa.text("SELECT id, status, internal_url, handle, created_at, started_at, stopped_at FROM endpoint")
    ).all()
    replica = sa.table(
        "replica",
        *(sa.column(name) for name in ("id", "endpoint", "status", "internal_url", "host", "last_error")),
        sa.column("handle", sa.JSON()),
        *(sa.column(name, Time()) for name in ("created_at", "started_at", "stopped_at")),
    )
    for id_, status, url, handle, created, started, stopped in rows:
        stored = json.loads(handle) if isinstance(handle, str) else handle
        if not stored:
            continue
        stored = {("server" if key == "endpoint" else key): value for key, value in stored.items()}
        live = status in ("STARTING", "RUNNING")
        bind.execute(
            replica.insert().values(
                id=id_,
                endpoint=id_,
                status="READY" if status == "RUNNING" else "STARTING" if live else "STOPPED",
                internal_url=url,
                host="",
                handle=stored,
                created_at=created,
                started_at=started,
                stopped_at=stopped,
                last_error="",
            )
        )
    op.execute(sa.text("UPDATE endpoint SET handle = '{}'"))
    with op.batch_alter_table("endpoint") as endpoint:
        endpoint.drop_column("internal_url")


def downgrade() -> None:
    with op.batch_alter_table("endpoint") as endpoint:
        endpoint.add_column(sa.Column("internal_url", String(), nullable=True))
    op.drop_table("poolevent")
    op.drop_table("replica")
