"""control loop: operator policy config, policy state, LTRF ledger, pushed configurations (issue 5)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 02:43:35.545028
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "control_configs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("policy", sa.String(length=100), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("mode", sa.String(length=20), nullable=False),
        sa.Column("bounds", sa.JSON(), nullable=False),
        sa.Column("limits", sa.JSON(), nullable=False),
        sa.Column("updated_ms", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_control_configs_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_control_configs")),
        sa.UniqueConstraint("cluster_id", name=op.f("uq_control_configs_cluster_id")),
    )
    op.create_table(
        "ledger_entries",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("queue", sa.String(length=500), nullable=False),
        sa.Column("start_ms", sa.BigInteger(), nullable=False),
        sa.Column("end_ms", sa.BigInteger(), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("entitlement", sa.Float(), nullable=False),
        sa.Column("usage", sa.Float(), nullable=False),
        sa.Column("counted", sa.Float(), nullable=False),
        sa.Column("debt", sa.Float(), nullable=False),
        sa.Column("total_usage", sa.Float(), nullable=False),
        sa.Column("total_counted", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_ledger_entries_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_entries")),
        sa.UniqueConstraint(
            "cluster_id", "queue", "start_ms", name="uq_ledger_entries_queue_start"
        ),
    )
    with op.batch_alter_table("ledger_entries", schema=None) as batch_op:
        batch_op.create_index(
            "ix_ledger_entries_cluster_end", ["cluster_id", "end_ms"], unique=False
        )

    op.create_table(
        "policy_states",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("policy", sa.String(length=100), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("updated_ms", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_policy_states_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_policy_states")),
        sa.UniqueConstraint("cluster_id", "policy", name="uq_policy_states_cluster_policy"),
    )
    op.create_table(
        "config_pushes",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column(
            "decision_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True
        ),
        sa.Column("pushed_ms", sa.BigInteger(), nullable=False),
        sa.Column("parent", sa.String(length=500), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("previous", sa.JSON(), nullable=False),
        sa.Column("version_before", sa.BigInteger(), nullable=True),
        sa.Column("version_after", sa.BigInteger(), nullable=True),
        sa.Column("status", sa.String(length=30), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_config_pushes_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["decision_id"],
            ["decisions.id"],
            name=op.f("fk_config_pushes_decision_id_decisions"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_config_pushes")),
    )
    with op.batch_alter_table("config_pushes", schema=None) as batch_op:
        batch_op.create_index(
            "ix_config_pushes_cluster_pushed", ["cluster_id", "pushed_ms"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("config_pushes", schema=None) as batch_op:
        batch_op.drop_index("ix_config_pushes_cluster_pushed")

    op.drop_table("config_pushes")
    op.drop_table("policy_states")
    with op.batch_alter_table("ledger_entries", schema=None) as batch_op:
        batch_op.drop_index("ix_ledger_entries_cluster_end")

    op.drop_table("ledger_entries")
    op.drop_table("control_configs")
