"""Agent runs: a harness's run (harness x model preset x endpoint x task) with the model calls it sent through
envhub's model door; and model presets that say their server returns token ids and log-probs.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString as String
from sqlmodel.sql.sqltypes import UTCDateTime as Time

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "agentrun",
        sa.Column("id", String(), primary_key=True),
        sa.Column("owner", String(), nullable=True),
        sa.Column("endpoint", String(), nullable=False),
        sa.Column("environment", String(), nullable=False),
        sa.Column("revision", String(), nullable=True),
        sa.Column("harness", String(), nullable=False),
        sa.Column("preset", String(), nullable=False),
        sa.Column("model", String(), nullable=False),
        sa.Column("task", sa.JSON(), nullable=True),
        sa.Column("status", String(), nullable=False),
        sa.Column("code", String(), nullable=False),
        sa.Column("message", String(), nullable=False),
        sa.Column("expires_at", Time(), nullable=False),
        sa.Column("limits", sa.JSON(), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("reward", sa.Float(), nullable=True),
        sa.Column("client_sessions", sa.JSON(), nullable=False),
        sa.Column("created_at", Time(), nullable=False),
        sa.Column("ended_at", Time(), nullable=True),
        sa.Column("credential_hash", String(), nullable=False),
        sa.Column("instance", String(), nullable=False),
    )
    for column in ("owner", "endpoint", "environment", "harness", "status"):
        op.create_index(f"ix_agentrun_{column}", "agentrun", [column])
    op.create_table(
        "modelcall",
        sa.Column("id", String(), primary_key=True),
        sa.Column("run", String(), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("dialect", String(), nullable=False),
        sa.Column("stream", sa.Boolean(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("code", String(), nullable=False),
        sa.Column("started_at", Time(), nullable=False),
        sa.Column("wall_s", sa.Float(), nullable=False),
        sa.Column("first_token_s", sa.Float(), nullable=True),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("response", sa.JSON(), nullable=True),
        sa.Column("text", String(), nullable=False),
        sa.Column("tool_calls", sa.JSON(), nullable=False),
        sa.Column("finish_reason", String(), nullable=True),
        sa.Column("usage", sa.JSON(), nullable=False),
        sa.Column("prompt_token_ids", sa.JSON(), nullable=True),
        sa.Column("completion_token_ids", sa.JSON(), nullable=True),
        sa.Column("completion_logprobs", sa.JSON(), nullable=True),
        sa.Column("client_session", String(), nullable=True),
    )
    op.create_index("ix_modelcall_run", "modelcall", ["run"])
    with op.batch_alter_table("modelpreset") as batch:
        batch.add_column(sa.Column("token_ids", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("modelpreset") as batch:
        batch.drop_column("token_ids")
    op.drop_table("modelcall")
    op.drop_table("agentrun")
