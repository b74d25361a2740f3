"""Board submissions: a Hub Space pinned at a revision, its stages' verdict, report ids and statistics; and each
environment's newest finished submission on its catalog row (`environment.board`).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String
from sqlmodel.sql.sqltypes import UTCDateTime as Time

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "submission",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("space", String(), nullable=False),
        sa.Column("revision", String(), nullable=False),
        sa.Column("submitter", String(), nullable=True),
        sa.Column("status", String(), nullable=False),
        sa.Column("stage", String(), nullable=True),
        sa.Column("verdict", String(), nullable=True),
        sa.Column("code", String(), nullable=True),
        sa.Column("message", String(), nullable=False),
        sa.Column("reports", sa.JSON(), nullable=False),
        sa.Column("training_signal", sa.Float(), nullable=True),
        sa.Column("headroom", sa.Float(), nullable=True),
        sa.Column("gameability_gap", sa.Float(), nullable=True),
        sa.Column("created_at", Time(), nullable=False),
        sa.Column("started_at", Time(), nullable=True),
        sa.Column("finished_at", Time(), nullable=True),
        sa.Column("endpoint", String(), nullable=True),
        sa.Column("instance", String(), nullable=True),
        sa.UniqueConstraint("space", "revision", name="uq_submission_space_revision"),
    )
    for column in ("space", "submitter", "status"):
        op.create_index(f"ix_submission_{column}", "submission", [column])
    # A catalog made before migrations has its columns from the models already (see 0009).
    if "board" not in {c["name"] for c in sa.inspect(op.get_bind()).get_columns("environment")}:
        op.add_column("environment", sa.Column("board", sa.JSON(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE environment ALTER COLUMN board SET STORAGE MAIN")


def downgrade() -> None:
    # Not a batch (a copy of the table): the full-text view reads it. SQLite drops a column in place since 3.35.
    op.drop_column("environment", "board")
    op.drop_table("submission")
