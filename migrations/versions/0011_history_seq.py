"""history seq: the order MapReduce histories were stored in, so the controller counts each
job's completed tasks exactly once (Fawkes' task throughput)

Rows stored before this revision are numbered by their fetch time, which keeps their order and
leaves room below any later number.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25 07:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("mr_jobs") as batch:
        batch.add_column(sa.Column("seq", sa.BigInteger(), nullable=True))
        batch.create_index("ix_mr_jobs_seq", ["seq"], unique=False)
    op.execute("UPDATE mr_jobs SET seq = fetched_ms WHERE status = 'ok'")


def downgrade() -> None:
    with op.batch_alter_table("mr_jobs") as batch:
        batch.drop_index("ix_mr_jobs_seq")
        batch.drop_column("seq")
