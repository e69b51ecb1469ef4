"""ledger lending: what each queue lent (to whom) and borrowed per interval (LTRF loan agreement)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22 11:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("ledger_entries") as batch:
        batch.add_column(sa.Column("lent", sa.Float(), server_default="0", nullable=False))
        batch.add_column(sa.Column("borrowed", sa.Float(), server_default="0", nullable=False))
        batch.add_column(sa.Column("lent_to", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ledger_entries") as batch:
        batch.drop_column("lent_to")
        batch.drop_column("borrowed")
        batch.drop_column("lent")
