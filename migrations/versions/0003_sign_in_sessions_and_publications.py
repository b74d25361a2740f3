"""Sign-in sessions (the Hub token sealed) and template publications as Spaces.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 00:13:19.202746
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "publication",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("environment", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("space", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("owner", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column(
            "status", sa.Enum("BUILDING", "CHECKING", "RUNNING", "FAILED", name="publicationstatus"), nullable=False
        ),
        sa.Column("message", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("space_url", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("url", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("check_id", sa.Integer(), nullable=True),
        sa.Column("conforms", sa.Boolean(), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("finished_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("publication", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_publication_environment"), ["environment"], unique=False)
        batch_op.create_index(batch_op.f("ix_publication_owner"), ["owner"], unique=False)
        batch_op.create_index(batch_op.f("ix_publication_space"), ["space"], unique=False)

    op.create_table(
        "usersession",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("username", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("fullname", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("avatar_url", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("token_sealed", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("scopes", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("expires_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("usersession", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_usersession_expires_at"), ["expires_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_usersession_username"), ["username"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("usersession", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_usersession_username"))
        batch_op.drop_index(batch_op.f("ix_usersession_expires_at"))

    op.drop_table("usersession")
    with op.batch_alter_table("publication", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_publication_space"))
        batch_op.drop_index(batch_op.f("ix_publication_owner"))
        batch_op.drop_index(batch_op.f("ix_publication_environment"))

    op.drop_table("publication")
