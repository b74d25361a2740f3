"""Evaluations a statistical report played: `evaluation.statistical_report` is the report (checkreport id) whose
reference player, adversarial panel member or replay the run is; such runs stay off the leaderboards.

Runs recorded before this belong to no report.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-11
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("evaluation", sa.Column("statistical_report", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("evaluation") as evaluations:
        evaluations.drop_column("statistical_report")
