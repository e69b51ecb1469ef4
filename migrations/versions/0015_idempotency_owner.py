"""jobs.idempotency_owner: an idempotency key is unique per owner, not across all users

Another user's identical key is another request: it must neither replay that user's job nor
learn its id from a conflict.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02 05:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("idempotency_owner", sa.String(length=100), nullable=False, server_default="")
        )
    op.execute(
        "UPDATE jobs SET idempotency_owner = COALESCE(owner, '') WHERE idempotency_key IS NOT NULL"
    )
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint("uq_jobs_idempotency_key", type_="unique")
        batch.create_unique_constraint(
            "uq_jobs_idempotency_owner", ["idempotency_owner", "idempotency_key"]
        )


def downgrade() -> None:
    # One key per database again: of the jobs sharing a key, the first submitted keeps it (ties
    # broken by id), so a retry of the original request still finds the job it created.
    op.execute(
        "UPDATE jobs SET idempotency_key = NULL WHERE idempotency_key IS NOT NULL AND EXISTS "
        "(SELECT 1 FROM jobs AS earlier WHERE earlier.idempotency_key = jobs.idempotency_key "
        "AND (earlier.submitted_ms < jobs.submitted_ms "
        "OR (earlier.submitted_ms = jobs.submitted_ms AND earlier.id < jobs.id)))"
    )
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint("uq_jobs_idempotency_owner", type_="unique")
        batch.create_unique_constraint("uq_jobs_idempotency_key", ["idempotency_key"])
        batch.drop_column("idempotency_owner")
