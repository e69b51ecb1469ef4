"""Models of the control loop: policy configuration, LTRF ledger, pushed configuration.

The decision audit trail itself is ``app.db.models.Decision`` (migration 0001); these tables hold
what the controller must remember across restarts (``docs/style.md``, "The tick": record):

* ``control_configs``: the operator's policy, parameters, mode and bounds set through
  ``PUT /policy`` (one row per cluster; absent means "use the settings").
* ``policy_states``: each queue policy's state between ticks (Fawkes ``D_i``, LTRF ledger), so a
  restart continues where it stopped.
* ``ledger_entries``: the LTRF ledger from measured usage, one row per queue and integrated
  interval; the unique key on ``(cluster, queue, start)`` makes re-integrating an interval after a
  restart impossible rather than merely unlikely.
* ``config_pushes``: every PUT the actuator sent, the values before and after and the RM's
  configuration version, so drift (a hand edit) is told apart from our own writes; a row with
  status ``baseline`` is live configuration the operator accepted (``PUT /policy`` with
  ``accept_drift``); a row is written ``pending`` before its PUT and settled after it, so a push
  whose tick died in between is still recognised as the sidecar's own.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models import Base


class ControlConfig(Base):
    """The operator's overrides of the policy settings, persisted by ``PUT /policy``."""

    __tablename__ = "control_configs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(
        ForeignKey("clusters.id", ondelete="CASCADE"), unique=True
    )
    policy: Mapped[str] = mapped_column(String(100))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    mode: Mapped[str] = mapped_column(String(20))
    bounds: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    limits: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated_ms: Mapped[int] = mapped_column(BigInteger)


class PolicyState(Base):
    """One queue policy's state between ticks (JSON from the policy's ``to_dict``)."""

    __tablename__ = "policy_states"
    __table_args__ = (
        UniqueConstraint("cluster_id", "policy", name="uq_policy_states_cluster_policy"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    policy: Mapped[str] = mapped_column(String(100))
    state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated_ms: Mapped[int] = mapped_column(BigInteger)


class LedgerEntry(Base):
    """One queue over one integrated interval ``[start_ms, end_ms)``; amounts in vcore-seconds."""

    __tablename__ = "ledger_entries"
    __table_args__ = (
        UniqueConstraint("cluster_id", "queue", "start_ms", name="uq_ledger_entries_queue_start"),
        Index("ix_ledger_entries_cluster_end", "cluster_id", "end_ms"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    queue: Mapped[str] = mapped_column(String(500))
    start_ms: Mapped[int] = mapped_column(BigInteger)
    end_ms: Mapped[int] = mapped_column(BigInteger)
    weight: Mapped[float] = mapped_column(Float)
    entitlement: Mapped[float] = mapped_column(Float)
    usage: Mapped[float] = mapped_column(Float)
    counted: Mapped[float] = mapped_column(Float)
    debt: Mapped[float] = mapped_column(Float)
    total_usage: Mapped[float] = mapped_column(Float)
    total_counted: Mapped[float] = mapped_column(Float)
    # what the queue lent (to whom) and borrowed over the interval (LTRF loan agreement)
    lent: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    borrowed: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    lent_to: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=dict)


class ConfigPush(Base):
    """One scheduler-configuration PUT: the values sent, the values they replaced, the outcome."""

    __tablename__ = "config_pushes"
    __table_args__ = (
        Index("ix_config_pushes_cluster_pushed", "cluster_id", "pushed_ms"),
        # Retention's delete of a decision finds the pushes that point at it by this index.
        Index("ix_config_pushes_decision", "decision_id"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    decision_id: Mapped[int | None] = mapped_column(ForeignKey("decisions.id", ondelete="SET NULL"))
    pushed_ms: Mapped[int] = mapped_column(BigInteger)
    parent: Mapped[str] = mapped_column(String(500))
    values: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    previous: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    version_before: Mapped[int | None] = mapped_column(BigInteger)
    version_after: Mapped[int | None] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(30))
