"""leadership: the leader's epoch and identity, for leader election and fencing

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-22 16:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "leadership",
        sa.Column("name", sa.String(50), primary_key=True),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("holder", sa.String(300), nullable=False),
        sa.Column("since_ms", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("leadership")
