"""Agent sessions joined to agent runs: `agentsession.run` is the run a session played for (the run id its client's
X-Envhub-Run credential named; never the credential), and `agentsession.client_session` the harness's own session id.

Sessions recorded before this belong to no run.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("agentsession", sa.Column("run", String(), nullable=True))
    op.add_column("agentsession", sa.Column("client_session", String(), nullable=True))
    op.create_index("ix_agentsession_run", "agentsession", ["run"])


def downgrade() -> None:
    op.drop_index("ix_agentsession_run", table_name="agentsession")
    with op.batch_alter_table("agentsession") as sessions:
        sessions.drop_column("client_session")
        sessions.drop_column("run")
