"""decision reference indexes: job_decisions.round_id and config_pushes.decision_id

Retention deletes old ``decisions``; each deletion nulls the job steps and pushes that point at
the decision (ON DELETE SET NULL), and without an index on the referencing column the database
scans the whole child table once per deleted decision, holding its write lock meanwhile.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 07:40:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain CREATE INDEX on both engines: no batch rebuild of the tables is needed.
    op.create_index("ix_job_decisions_round", "job_decisions", ["round_id"], unique=False)
    op.create_index("ix_config_pushes_decision", "config_pushes", ["decision_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_config_pushes_decision", table_name="config_pushes")
    op.drop_index("ix_job_decisions_round", table_name="job_decisions")
