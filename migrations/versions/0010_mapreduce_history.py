"""mapreduce history: finished MapReduce jobs and their tasks from the JobHistory server; the
node label a deadline job was placed on and the one an application asked for

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24 08:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BIG = ("submit_ms", "start_ms", "finish_ms")
_COUNTS = ("maps_total", "maps_completed", "reduces_total", "reduces_completed")
_BIG_DEFAULTED = (
    "avg_map_ms",
    "avg_shuffle_ms",
    "avg_merge_ms",
    "avg_reduce_ms",
    "map_phase_ms",
    "reduce_phase_ms",
)
_BYTES = ("input_bytes", "output_bytes", "shuffle_bytes", "spilled_records", "cpu_ms", "vcore_ms")


def upgrade() -> None:
    op.create_table(
        "mr_jobs",
        sa.Column("app_id", sa.String(length=100), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("fetched_ms", sa.BigInteger(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("job_id", sa.String(length=100), nullable=True),
        sa.Column("state", sa.String(length=20), nullable=True),
        *(sa.Column(name, sa.BigInteger(), nullable=True) for name in _BIG),
        *(sa.Column(name, sa.Integer(), nullable=False) for name in _COUNTS),
        *(sa.Column(name, sa.BigInteger(), nullable=False) for name in _BIG_DEFAULTED),
        sa.Column("map_peak_vcores", sa.Float(), nullable=False),
        sa.Column("reduce_peak_vcores", sa.Float(), nullable=False),
        *(sa.Column(name, sa.BigInteger(), nullable=False) for name in _BYTES),
        sa.Column("cluster_vcores", sa.Float(), nullable=False),
        sa.Column("counters", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["app_id"],
            ["applications.app_id"],
            name=op.f("fk_mr_jobs_app_id_applications"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("app_id", name=op.f("pk_mr_jobs")),
    )
    op.create_index("ix_mr_jobs_fetched", "mr_jobs", ["fetched_ms"], unique=False)
    op.create_table(
        "mr_tasks",
        sa.Column("app_id", sa.String(length=100), nullable=False),
        sa.Column("task_id", sa.String(length=120), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("start_ms", sa.BigInteger(), nullable=True),
        sa.Column("finish_ms", sa.BigInteger(), nullable=True),
        sa.Column("elapsed_ms", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["app_id"],
            ["mr_jobs.app_id"],
            name=op.f("fk_mr_tasks_app_id_mr_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("app_id", "task_id", name=op.f("pk_mr_tasks")),
    )


    op.add_column("jobs", sa.Column("node_label", sa.String(length=200), nullable=True))
    op.add_column(
        "applications", sa.Column("node_label", sa.String(length=200), nullable=True)
    )


def downgrade() -> None:
    with op.batch_alter_table("applications") as batch:
        batch.drop_column("node_label")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("node_label")
    op.drop_table("mr_tasks")
    op.drop_index("ix_mr_jobs_fetched", table_name="mr_jobs")
    op.drop_table("mr_jobs")
