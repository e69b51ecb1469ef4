"""observation censored: a killed sidecar job's run kept as a lower bound of its work (Promise's
estimator learns it as a censored sample)

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28 16:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("estimator_observations") as batch:
        batch.add_column(
            sa.Column("censored", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("estimator_observations") as batch:
        batch.drop_column("censored")
