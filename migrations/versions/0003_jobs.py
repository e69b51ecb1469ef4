"""deadline-tagged jobs: jobs, job decisions, estimator state and observations (issue 6)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 02:45:42.657398
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "estimator_states",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("updated_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_estimator_states")),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("queue", sa.String(length=500), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("requested_tasks", sa.Integer(), nullable=False),
        sa.Column("input_bytes", sa.BigInteger(), nullable=True),
        sa.Column("block_size", sa.BigInteger(), nullable=True),
        sa.Column("deadline_s", sa.Float(), nullable=False),
        sa.Column("deadline_ms", sa.BigInteger(), nullable=False),
        sa.Column("submitted_ms", sa.BigInteger(), nullable=False),
        sa.Column("run", sa.JSON(), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("granted_cpus", sa.Integer(), nullable=True),
        sa.Column("admitted_ms", sa.BigInteger(), nullable=True),
        sa.Column("app_id", sa.String(length=100), nullable=True),
        sa.Column("app_state", sa.String(length=20), nullable=True),
        sa.Column("final_status", sa.String(length=20), nullable=True),
        sa.Column("yarn_submitted_ms", sa.BigInteger(), nullable=True),
        sa.Column("finished_ms", sa.BigInteger(), nullable=True),
        sa.Column("elapsed_ms", sa.BigInteger(), nullable=True),
        sa.Column("vcore_seconds", sa.BigInteger(), nullable=True),
        sa.Column("met_deadline", sa.Boolean(), nullable=True),
        sa.Column("lifetime_expiry_ms", sa.BigInteger(), nullable=True),
        sa.Column("timeout_set", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("updated_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint("app_id", name=op.f("uq_jobs_app_id")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_jobs_idempotency_key")),
    )
    op.create_index("ix_jobs_queue_submitted", "jobs", ["queue", "submitted_ms"], unique=False)
    op.create_index("ix_jobs_state", "jobs", ["state"], unique=False)
    op.create_index("ix_jobs_submitted", "jobs", ["submitted_ms", "id"], unique=False)

    op.create_table(
        "estimator_observations",
        sa.Column("app_id", sa.String(length=100), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=True),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("observed_ms", sa.BigInteger(), nullable=False),
        sa.Column("learned", sa.Boolean(), nullable=False),
        sa.Column("tasks", sa.Integer(), nullable=True),
        sa.Column("deadline_s", sa.Float(), nullable=True),
        sa.Column("comp_time", sa.Float(), nullable=True),
        sa.Column("cpus", sa.Integer(), nullable=True),
        sa.Column("success", sa.Boolean(), nullable=True),
        sa.Column("estimator_version", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_estimator_observations_job_id_jobs"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("app_id", name=op.f("pk_estimator_observations")),
    )
    op.create_index(
        "ix_estimator_observations_observed",
        "estimator_observations",
        ["observed_ms"],
        unique=False,
    )

    op.create_table(
        "job_decisions",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("round_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("action", sa.String(length=20), nullable=False),
        sa.Column("policy", sa.String(length=20), nullable=True),
        sa.Column("cpus", sa.Integer(), nullable=False),
        sa.Column("req_cpus", sa.Integer(), nullable=True),
        sa.Column("fraction", sa.Float(), nullable=True),
        sa.Column("ttd_s", sa.Float(), nullable=True),
        sa.Column("priority", sa.Float(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("numbers", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_decisions_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["round_id"],
            ["decisions.id"],
            name=op.f("fk_job_decisions_round_id_decisions"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_decisions")),
    )
    op.create_index("ix_job_decisions_job", "job_decisions", ["job_id", "id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_job_decisions_job", table_name="job_decisions")

    op.drop_table("job_decisions")
    op.drop_index("ix_estimator_observations_observed", table_name="estimator_observations")

    op.drop_table("estimator_observations")
    op.drop_index("ix_jobs_submitted", table_name="jobs")
    op.drop_index("ix_jobs_state", table_name="jobs")
    op.drop_index("ix_jobs_queue_submitted", table_name="jobs")

    op.drop_table("jobs")
    op.drop_table("estimator_states")
