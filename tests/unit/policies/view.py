"""Observation views for the queue adapters' tests (``app/policies/<name>/queue.py``)."""

from __future__ import annotations

from app.domain.observation import ClusterTotals, PolicyInputs, QueueInputs

TOTAL8 = ClusterTotals(8.0, 8192.0)


def q(
    used_v: float = 0, pend_v: float = 0, pend_c: float = 0, used_m: float = 0, pend_m: float = 0
) -> QueueInputs:
    return QueueInputs(1, used_v, used_m, pend_v, pend_m, pend_c, 0, 1, 0, 0, 0, 0)


def inputs(total: ClusterTotals = TOTAL8, **queues: QueueInputs) -> PolicyInputs:
    return PolicyInputs(60_000, 0, 60, total, {f"root.{k}": v for k, v in queues.items()})
