"""RRF's queue adapter: the shared observation view -> tenants -> absolute capacities (seed 002,
section 9.5, Algorithms 2 and 3; ``docs/style.md``, "The tick": decide).

Decisions where the docs are silent: each queue is one tenant whose share vector is ``<w_i, w_i>``
(no child queues, so no IWA); demand is used plus pending ``<vcores, MB>`` and the capacity the
cluster's ``<vcores, MB>``. Demands are in MB already, so ``memory_mb_per_unit`` does not apply.
The outcome is absolute (``[memory=..,vcores=..]`` per queue), which the plan step-limits as
fractions of the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.domain.observation import PolicyInputs
from app.domain.outcome import PolicyOutcome
from app.policies.base import QueueContext
from app.policies.rrf import core


def decide(
    view: PolicyInputs, queues: tuple[str, ...], context: QueueContext, state: Mapping[str, Any]
) -> PolicyOutcome:
    """RRF (or the baseline named by ``algorithm``) over the queues' demands; stateless."""
    total = view.total
    if total.vcores <= 0 or total.memory_mb <= 0:
        return PolicyOutcome(note="the cluster has no resources (no running NodeManager)")
    tenants = {}
    for q in queues:
        w = float(context.weights.get(q, 1.0))
        seen = view.queues.get(q)
        demand = core.Res(seen.demand_vcores, seen.demand_memory_mb) if seen else core.Res(0, 0)
        tenants[q] = core.Tenant(shares=core.Res(w, w), demand=demand)
    capacity = core.Res(total.vcores, total.memory_mb)
    core.validate(tenants, capacity)
    algorithm = str(context.params.get("algorithm", "rrf"))
    alloc = core.allocate(tenants, capacity, algorithm)
    details = {
        "algorithm": algorithm,
        "capacity": capacity.as_dict(),
        "demand": {q: t.demand.as_dict() for q, t in tenants.items()},
        "shares": {q: t.shares.as_dict() for q, t in tenants.items()},
        "alloc": {q: a.as_dict() for q, a in alloc.items()},
    }
    return PolicyOutcome(
        # the allocation in YARN's syntax before the step limit (memory is in MB already)
        absolute=core.yarn_absolute_capacities(alloc),
        amounts={q: a.as_dict() for q, a in alloc.items()},
        details=details,
    )
