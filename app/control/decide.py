"""Run the configured queue policy on one tick's inputs (``docs/style.md``, "The tick": decide).

Adapters only: each builds the policy module's own input types from ``PolicyInputs`` and calls
its public functions (``fawkes.step``, ``ltrf.allocate`` / ``entitlements`` /
``shares_from_alloc``, ``rrf.allocate`` / ``yarn_absolute_capacities``); no policy arithmetic is
repeated here. The outcome carries the shares (or RRF's absolute capacities), the policy state to
persist, and the intermediate numbers for the audit trail.

Decisions where the docs are silent:

* Fawkes: ``waiting_jobs`` = pending apps, ``waiting_tasks`` = pending containers,
  ``running_jobs`` = running apps, ``completed_jobs`` = apps that finished in the interval. The RM
  reports no input bytes, per-app task counts or runtime estimates, so ``DD``, ``TT`` and ``JS``
  see 0 (``DD``/``JS`` then fall back to equal weights inside Fawkes). The minimum shares ``m_i``
  are the operator's minimum bounds; Fawkes' ``tau`` is the hysteresis, so no further minimum
  change applies.
* LTRF/MLRF plan one interval ahead: demand = used + pending vcores (averages), capacity = the
  cluster's vcores, and ``ltrf.allocate(..., horizon_s=interval)`` against the measured ledger.
* RRF: each queue's share vector is ``<w_i, w_i>``; demand = used + pending ``<vcores, MB>``;
  capacity = the cluster's ``<vcores, MB>``. One tenant per queue (no child queues, so no IWA).
  Demands are in MB already, so ``memory_mb_per_unit`` does not apply here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.control.config import ControlConfig
from app.domain.observation import PolicyInputs, QueueInputs
from app.domain.outcome import PolicyOutcome
from app.policies import registry
from app.policies.base import PolicyError, QueueContext
from app.policies.fawkes import core as fawkes
from app.policies.ltrf import core as ltrf
from app.policies.rrf import core as rrf


def fawkes_sample(q: QueueInputs) -> fawkes.QueueSample:
    """The Fawkes sample of one queue's interval averages."""
    return fawkes.QueueSample(
        waiting_jobs=q.pending_apps,
        waiting_tasks=q.pending_containers,
        running_jobs=q.running_apps,
        used_fraction=min(1.0, q.used_fraction),
        vcore_utilization=q.vcore_utilization,
        memory_utilization=q.memory_utilization,
        completed_jobs=float(q.completed_apps),
    )


def run_fawkes(
    cfg: ControlConfig, inputs: PolicyInputs, queues: Sequence[str], state: Mapping[str, Any]
) -> PolicyOutcome:
    """One ``fawkes.step`` at ``t = now`` (seconds)."""
    params = fawkes.FawkesParams.from_values(
        cfg.params, min_shares={q: cfg.bounds[q].min_h / 10000 for q in queues if q in cfg.bounds}
    )
    tick = fawkes.FawkesTick(
        t=inputs.now_ms / 1000, queues={q: fawkes_sample(inputs.queues[q]) for q in queues}
    )
    decision, new_state = fawkes.step(fawkes.FawkesState.from_dict(state), tick, params)
    shares = {q: decision.shares.get(q, 0.0) for q in queues}
    note = decision.reason
    return PolicyOutcome(
        shares=shares if any(v > 0 for v in shares.values()) else None,
        state=new_state.to_dict(),
        details=decision.to_dict(),
        min_change_applies=False,
        note=note if any(v > 0 for v in shares.values()) else f"{note}: no queue has a share",
    )


def run_ltrf(
    cfg: ControlConfig,
    inputs: PolicyInputs,
    queues: Sequence[str],
    ledger: ltrf.LtrfState,
    memoryless: bool,
) -> PolicyOutcome:
    """Plan the next interval with LTRF (or MLRF) against the measured ledger."""
    capacity = inputs.total.vcores
    if capacity <= 0:
        return PolicyOutcome(note="the cluster has no vcores (no running NodeManager)")
    weights = {q: cfg.weight(q) for q in queues}
    demand = {q: inputs.queues[q].demand_vcores for q in queues}
    counted = {} if memoryless else {q: ledger.counted.get(q, 0.0) for q in queues}
    members = [q for q in queues if demand[q] > 0 or counted.get(q, 0.0) > 0]
    ent = ltrf.entitlements(weights, members, capacity)
    discount = 1.0 if memoryless else float(cfg.params.get("discount", 1.0))
    alloc = ltrf.allocate(counted, demand, capacity, weights, ent, discount, cfg.interval_s)
    shares = ltrf.shares_from_alloc(alloc, weights, capacity)
    details = {
        "capacity_vcores": capacity,
        "weights": weights,
        "demand": demand,
        "entitlement": ent,
        "counted": counted,
        "debt": {q: ledger.debt.get(q, 0.0) for q in queues},
        "discount": discount,
        "horizon_s": cfg.interval_s,
        "alloc": alloc,
    }
    return PolicyOutcome(shares=shares, details=details)


def run_rrf(cfg: ControlConfig, inputs: PolicyInputs, queues: Sequence[str]) -> PolicyOutcome:
    """RRF (or a baseline) over the queues' demands; absolute capacities for YARN."""
    total = inputs.total
    if total.vcores <= 0 or total.memory_mb <= 0:
        return PolicyOutcome(note="the cluster has no resources (no running NodeManager)")
    tenants = {
        q: rrf.Tenant(
            shares=rrf.Res(cfg.weight(q), cfg.weight(q)),
            demand=rrf.Res(inputs.queues[q].demand_vcores, inputs.queues[q].demand_memory_mb),
        )
        for q in queues
    }
    capacity = rrf.Res(total.vcores, total.memory_mb)
    rrf.validate(tenants, capacity)
    algorithm = str(cfg.params.get("algorithm", "rrf"))
    alloc = rrf.allocate(tenants, capacity, algorithm)
    details = {
        "algorithm": algorithm,
        "capacity": capacity.as_dict(),
        "demand": {q: t.demand.as_dict() for q, t in tenants.items()},
        "shares": {q: t.shares.as_dict() for q, t in tenants.items()},
        "alloc": {q: a.as_dict() for q, a in alloc.items()},
    }
    return PolicyOutcome(
        # the allocation in YARN's syntax before the step limit (memory is in MB already)
        absolute=rrf.yarn_absolute_capacities(alloc),
        amounts={q: a.as_dict() for q, a in alloc.items()},
        details=details,
    )


def context(cfg: ControlConfig, queues: Sequence[str]) -> QueueContext:
    """The operator's configuration as a queue policy sees it (minimum bounds as fractions)."""
    return QueueContext(
        params=dict(cfg.params),
        weights={q: cfg.weight(q) for q in queues},
        min_shares={q: cfg.bounds[q].min_h / 10000 for q in queues if q in cfg.bounds},
        interval_s=cfg.interval_s,
    )


def run_policy(
    cfg: ControlConfig,
    inputs: PolicyInputs,
    queues: Sequence[str],
    state: Mapping[str, Any],
    ledger: ltrf.LtrfState,
) -> PolicyOutcome:
    """Dispatch on the configured policy; ``PolicyError`` for an unknown one."""
    spec = registry.lookup(cfg.policy)
    if spec.decide is not None:
        return spec.decide(inputs, tuple(queues), context(cfg, queues), state)
    base = cfg.base_policy
    if base == "fawkes":
        return run_fawkes(cfg, inputs, queues, state)
    if base in ("ltrf", "mlrf"):
        return run_ltrf(cfg, inputs, queues, ledger, memoryless=base == "mlrf")
    if base == "rrf":
        return run_rrf(cfg, inputs, queues)
    raise PolicyError("policy", f"no controller adapter for {cfg.policy!r}")
