"""job tallies: ended jobs and job decisions counted once by retention, not on every scrape

``/metrics`` grouped every job and every job decision on each scrape (0.5 s at a million job
decisions on SQLite). Retention now adds the ended jobs and the job decisions to one row of
tallies (``job_tallies``) and stamps them ``tallied_ms`` in the same transaction; a scrape counts
the rows not stamped yet, through partial indexes holding only those, and adds the tallies.
Existing rows start unstamped: they are counted one by one until the first retention pass.

Retention also deletes, beyond the decision window, job decisions by their own age
(``ix_job_decisions_created``) and the ended jobs never given a YARN application, through a
partial index holding only those once tallied (``ix_jobs_prunable``): a step reads the rows it
deletes, not the jobs kept forever with their applications. Deleting a job makes the database
look for the ``estimator_observations`` naming it, which an index lets it find without scanning
the table.

The predicates are written out here (not imported) so this revision never changes; the queries
repeat them word for word (``app.db.jobs_models.UNTALLIED_SQL``, ``PRUNABLE_SQL``).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02 14:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_UNTALLIED = "tallied_ms IS NULL"
_PRUNABLE = "NOT (app_id IS NOT NULL) AND tallied_ms IS NOT NULL"

# table, index name, columns
_INDEXES = (
    ("jobs", "ix_jobs_untallied", ["state", "met_deadline"]),
    ("job_decisions", "ix_job_decisions_untallied", ["id"]),
)


def upgrade() -> None:
    op.create_table(
        "job_tallies",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("updated_ms", sa.BigInteger(), nullable=False),
    )
    # A nullable column without a default: a plain ALTER TABLE ADD COLUMN on both engines.
    for table, name, columns in _INDEXES:
        op.add_column(table, sa.Column("tallied_ms", sa.BigInteger(), nullable=True))
        op.create_index(
            name,
            table,
            columns,
            unique=False,
            sqlite_where=sa.text(_UNTALLIED),
            postgresql_where=sa.text(_UNTALLIED),
        )
    op.create_index(
        "ix_jobs_prunable",
        "jobs",
        ["updated_ms", "id"],
        unique=False,
        sqlite_where=sa.text(_PRUNABLE),
        postgresql_where=sa.text(_PRUNABLE),
    )
    op.create_index("ix_job_decisions_created", "job_decisions", ["created_ms", "id"])
    op.create_index("ix_estimator_observations_job", "estimator_observations", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_estimator_observations_job", table_name="estimator_observations")
    op.drop_index("ix_job_decisions_created", table_name="job_decisions")
    op.drop_index("ix_jobs_prunable", table_name="jobs")
    for table, name, _ in reversed(_INDEXES):
        op.drop_index(name, table_name=table)
        with op.batch_alter_table(table) as batch:
            batch.drop_column("tallied_ms")
    op.drop_table("job_tallies")
