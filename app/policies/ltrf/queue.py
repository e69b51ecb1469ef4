"""LTRF's and MLRF's queue adapter: the shared observation view and the measured ledger -> one
interval's allocation -> shares (seed 002, section 9.4.3, Algorithm 1; ``docs/style.md``, "The
tick": decide).

Decisions where the docs are silent: the plan looks one control interval ahead; demand is used
plus pending vcores (interval means) and the capacity is the cluster's vcores. The ledger is the
caller's (``QueueContext.counted``, integrated from *measured* usage by ``app.control.ledger`` in
the controller and in the simulator alike), so this adapter never advances it. A queue is a member
when it has demand or counted usage. MLRF ignores the ledger and the discount.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.domain.observation import PolicyInputs
from app.domain.outcome import PolicyOutcome
from app.policies.base import QueueContext
from app.policies.ltrf import core


def _decide(
    view: PolicyInputs, queues: tuple[str, ...], context: QueueContext, memoryless: bool
) -> PolicyOutcome:
    capacity = view.total.vcores
    if capacity <= 0:
        return PolicyOutcome(note="the cluster has no vcores (no running NodeManager)")
    weights = {q: float(context.weights.get(q, 1.0)) for q in queues}
    demand = {q: view.queues[q].demand_vcores if q in view.queues else 0.0 for q in queues}
    counted = {} if memoryless else {q: context.counted.get(q, 0.0) for q in queues}
    members = [q for q in queues if demand[q] > 0 or counted.get(q, 0.0) > 0]
    ent = core.entitlements(weights, members, capacity)
    discount = 1.0 if memoryless else float(context.params.get("discount", 1.0))
    alloc = core.allocate(counted, demand, capacity, weights, ent, discount, context.interval_s)
    details = {
        "capacity_vcores": capacity,
        "weights": weights,
        "demand": demand,
        "entitlement": ent,
        "counted": counted,
        "debt": {q: context.debt.get(q, 0.0) for q in queues},
        "discount": discount,
        "horizon_s": context.interval_s,
        "alloc": alloc,
    }
    return PolicyOutcome(shares=core.shares_from_alloc(alloc, weights, capacity), details=details)


def decide_ltrf(
    view: PolicyInputs, queues: tuple[str, ...], context: QueueContext, state: Mapping[str, Any]
) -> PolicyOutcome:
    """LTRF against the measured ledger; ``state`` is unused (the ledger is the caller's)."""
    return _decide(view, queues, context, memoryless=False)


def decide_mlrf(
    view: PolicyInputs, queues: tuple[str, ...], context: QueueContext, state: Mapping[str, Any]
) -> PolicyOutcome:
    """MLRF: weighted max-min fairness over this interval's demand alone."""
    return _decide(view, queues, context, memoryless=True)
