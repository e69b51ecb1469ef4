"""admission settings: the admission policy chosen at run time (PUT /admission)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-22 21:50:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "admission_settings",
        sa.Column("cluster_name", sa.String(200), primary_key=True),
        sa.Column("policy", sa.String(100), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("updated_ms", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("admission_settings")
