"""API tokens and the principal on audited rows

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 11:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("user", sa.String(length=100), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("expires_ms", sa.BigInteger(), nullable=True),
        sa.Column("revoked_ms", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("name", name=op.f("uq_api_tokens_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    with op.batch_alter_table("decisions") as batch:
        batch.add_column(sa.Column("principal", sa.String(length=200), nullable=True))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("owner", sa.String(length=100), nullable=True))
    with op.batch_alter_table("job_decisions") as batch:
        batch.add_column(sa.Column("principal", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_decisions") as batch:
        batch.drop_column("principal")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("owner")
    with op.batch_alter_table("decisions") as batch:
        batch.drop_column("principal")
    op.drop_table("api_tokens")
