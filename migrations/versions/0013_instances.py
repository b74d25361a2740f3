"""Instances: the envhub processes sharing a database are its instances, no longer its replicas.

"Replica" named both an envhub process and one server of an endpoint's pool (the `replica`
table, which keeps its name). The columns that say which envhub process runs or manages a
row are renamed: `syncrun.replica`, `endpoint.replica` (and its index), `evaluation.replica`
and `agentsession.replica` become `instance`. Their values, `host-pid-random` ids, stay as
they are, and so do the `envhub.spare` labels of spare containers, which hold the same ids.

The lease each live process held on itself, `replica:<id>`, is now `instance:<id>`. The old
rows are deleted: a process of this version takes its own lease when it starts, and one of
an earlier version cannot run on the renamed columns anyway.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES = ("syncrun", "endpoint", "evaluation", "agentsession")


def _rename(old: str, new: str) -> None:
    """Each table's column `old` to `new`, the endpoint's index with it; the processes' own leases of `old` go.

    The index is dropped before and made after: on SQLite Alembic's batch copies the table, and cannot index a
    column it renames in the same copy."""
    op.drop_index(f"ix_endpoint_{old}", table_name="endpoint")
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.alter_column(old, new_column_name=new)
    op.create_index(f"ix_endpoint_{new}", "endpoint", [new])
    op.execute(sa.text("DELETE FROM lease WHERE name LIKE :prefix").bindparams(prefix=f"{old}:%"))


def upgrade() -> None:
    _rename("replica", "instance")


def downgrade() -> None:
    _rename("instance", "replica")
