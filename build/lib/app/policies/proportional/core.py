"""Proportional shares: each queue's share follows its pending demand, above a floor.

Not from a paper: the smallest useful queue policy, kept as the worked example of adding one
policy folder (``docs/architecture.md``, "Adding a policy"). Every queue keeps ``floor`` of the
cluster; the rest is split in proportion to pending demand (equally when nothing is pending).
"""

from __future__ import annotations

from collections.abc import Mapping

from app.policies.base import ParamSpec, PolicyError, PolicySpec, finite_number

FLOOR = ParamSpec(
    "floor",
    float,
    0.05,
    "share every queue keeps (fraction); above 1/n it is capped at equal shares",
    minimum=0.0,
    maximum=1.0,
)


def shares(pending: Mapping[str, float], floor: float) -> dict[str, float]:
    """Shares summing to 1: ``floor`` each (at most ``1/n``), the remainder by pending demand."""
    if not pending:
        raise PolicyError("queues", "at least one queue is needed")
    for name, value in pending.items():
        finite_number(value, f"pending.{name}")
    n = len(pending)
    base = min(finite_number(floor, "floor", high=1.0), 1.0 / n)
    rest = 1.0 - n * base
    total = sum(pending.values())
    if total <= 0:
        return {q: 1.0 / n for q in pending}
    return {q: base + rest * d / total for q, d in pending.items()}


SPEC = PolicySpec(
    name="proportional",
    kind="queue",
    summary="shares proportional to pending demand, each queue above a floor",
    paper="none (a worked example of the policy seam; docs/architecture.md)",
    params=(FLOOR,),
)
