"""app final seen: the poll that first saw an application in a final state, so the controller
counts each completed application once (Fawkes' job throughput)

Applications already final are marked seen at their last write, before any later poll.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25 08:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("applications") as batch:
        batch.add_column(sa.Column("final_seen_ms", sa.BigInteger(), nullable=True))
        batch.create_index(
            "ix_applications_final_seen", ["cluster_id", "final_seen_ms"], unique=False
        )
    op.execute(
        "UPDATE applications SET final_seen_ms = updated_ms "
        "WHERE state IN ('FINISHED', 'FAILED', 'KILLED')"
    )


def downgrade() -> None:
    with op.batch_alter_table("applications") as batch:
        batch.drop_index("ix_applications_final_seen")
        batch.drop_column("final_seen_ms")
