"""job progress: a running job's first and latest progress readings from the RM, with when each
was read, so a round projects its end from the rate between them (Promise's progress rule)

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03 14:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    ("progress_first", sa.Float()),
    ("progress_first_ms", sa.BigInteger()),
    ("progress_last", sa.Float()),
    ("progress_last_ms", sa.BigInteger()),
)


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        for name, kind in _COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        for name, _ in reversed(_COLUMNS):
            batch.drop_column(name)
