"""Postgres: keep environment rows narrow, so counting and filtering word matches reads little.

A count of the environments a word matches comes from the GIN index's bitmap, then visits
each matching row on the heap; the filters (tags, health, conformance) are read there too.
Rows that hold the README, the card and the tsvector inline make that visit read ~4x more
pages, and tags moved out of line cost a TOAST lookup per row. So: big values go to TOAST
from 256 bytes of row up, and the columns filters read stay in the row (storage MAIN).
Rows written before this revision keep their layout until they are next updated.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FILTERED = ("tags", "health", "conformance")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE environment SET (toast_tuple_target = 256)")
    op.execute("ALTER TABLE environment " + ", ".join(f"ALTER COLUMN {c} SET STORAGE MAIN" for c in _FILTERED))


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE environment RESET (toast_tuple_target)")
    op.execute("ALTER TABLE environment " + ", ".join(f"ALTER COLUMN {c} SET STORAGE EXTENDED" for c in _FILTERED))
