"""per-poll cluster totals and application disappearance, for polls that write only changes

Revision ID: 0006
Revises: 0004
Create Date: 2026-11-22 11:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "cluster_samples",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("taken_ms", sa.BigInteger(), nullable=False),
        sa.Column("nodes", sa.Integer(), nullable=False),
        sa.Column("running_nodes", sa.Integer(), nullable=False),
        sa.Column("capability_vcores", sa.BigInteger(), nullable=False),
        sa.Column("capability_mb", sa.BigInteger(), nullable=False),
        sa.Column("used_vcores", sa.BigInteger(), nullable=False),
        sa.Column("used_mb", sa.BigInteger(), nullable=False),
        sa.Column("num_containers", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_cluster_samples_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cluster_samples")),
    )
    with op.batch_alter_table("cluster_samples", schema=None) as batch_op:
        batch_op.create_index(
            "ix_cluster_samples_cluster_taken", ["cluster_id", "taken_ms"], unique=False
        )
    with op.batch_alter_table("applications", schema=None) as batch_op:
        batch_op.add_column(sa.Column("gone_ms", sa.BigInteger(), nullable=True))
    # Existing history: one totals row per past poll, so the controller's window keeps working.
    op.execute(
        """
        INSERT INTO cluster_samples (cluster_id, taken_ms, nodes, running_nodes,
            capability_vcores, capability_mb, used_vcores, used_mb, num_containers)
        SELECT cluster_id, taken_ms, COUNT(*),
            SUM(CASE WHEN state = 'RUNNING' THEN 1 ELSE 0 END),
            SUM(CASE WHEN state = 'RUNNING' THEN capability_vcores ELSE 0 END),
            SUM(CASE WHEN state = 'RUNNING' THEN capability_mb ELSE 0 END),
            SUM(CASE WHEN state = 'RUNNING' THEN used_vcores ELSE 0 END),
            SUM(CASE WHEN state = 'RUNNING' THEN used_mb ELSE 0 END),
            SUM(CASE WHEN state = 'RUNNING' THEN num_containers ELSE 0 END)
        FROM node_samples GROUP BY cluster_id, taken_ms
        """
    )


def downgrade() -> None:
    with op.batch_alter_table("applications", schema=None) as batch_op:
        batch_op.drop_column("gone_ms")
    with op.batch_alter_table("cluster_samples", schema=None) as batch_op:
        batch_op.drop_index("ix_cluster_samples_cluster_taken")
    op.drop_table("cluster_samples")
