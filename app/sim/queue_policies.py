"""The simulator's queue controller: the live controller's own tick over simulated observations
(``docs/architecture.md``, "The tick"; seed 000 sections 4.2 and 4.3, seed 002 sections 9.4 and
9.5).

Every registered queue policy (``fawkes:<W>`` for each weighting, ``ltrf``, ``mlrf``, ``rrf``,
``proportional``, and any later one) runs the same path as in the sidecar:

1. the runner's ``QueueObservation``s become the shared observation view (``PolicyInputs``), with
   what the simulator knows and the RM does not report (input bytes of waiting jobs, completed
   tasks, slowdowns: Fawkes' DD, TT and JS);
2. the measured ledger advances with ``app.control.ledger.integrate`` over the interval just
   ended (its mean used vcores), as the controller integrates its stored polls;
3. ``app.control.decide.run_policy``: the policy's own adapter from the registry;
4. ``app.control.plan.plan_outcome``: bounds raised to the minimum shares, step limit, minimum
   change, capacities summing to exactly 100.00 (or RRF's absolute capacities);
5. the plan's values become the simulated CapacityScheduler's capacities and maximum capacities.

Plan limits (``PlanSettings``) default to the controller's. A policy whose spec reserves minimum
shares (Fawkes' core nodes) gets them as the operator's minimum bounds, split equally.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.control import config
from app.control import floors as control_floors
from app.control.budget import format_hundredths
from app.control.decide import run_policy
from app.control.ledger import LedgerState, Poll, rectangle
from app.control.plan import Plan, plan_outcome
from app.domain.observation import ClusterTotals, PolicyInputs, QueueInputs, SamplePoint
from app.domain.outcome import PolicyOutcome
from app.policies import registry
from app.policies.rounding import capacity_hundredths
from app.sim.runner import QueueDecision, QueueObservation

# The controller's defaults (``Settings.max_step_pp`` / ``min_change_pp``), so a what-if moves
# shares as the sidecar would.
MAX_STEP_PP = 10.0
MIN_CHANGE_PP = 1.0
# The simulator's observations are one per interval with no gaps: integrate every one.
_NO_GAP_LIMIT_MS = 2**62


@dataclass(frozen=True, slots=True)
class PlanSettings:
    """The controller's plan limits as simulator options (``--max-step-pp``,
    ``--min-change-pp``); defaults are the controller's."""

    max_step_pp: float = MAX_STEP_PP
    min_change_pp: float = MIN_CHANGE_PP


def queue_policy_names() -> list[str]:
    """Every queue policy the simulator can run: each registered one, a policy with a suffix
    parameter once per choice (``fawkes:TD``)."""
    out: list[str] = []
    for name in registry.names("queue"):
        spec = registry.lookup(name)
        suffix = next((p for p in spec.params if p.name == spec.suffix_param), None)
        if suffix is not None and suffix.choices:
            out.extend(f"{name}:{choice}" for choice in suffix.choices)
        else:
            out.append(name)
    return out


def reserved_bounds(policy: str, queues: Sequence[str]) -> dict[str, dict[str, float]]:
    """Minimum bounds (percent) splitting the policy's reserved share equally, rounded down to
    hundredths so they never sum above it; none when the policy reserves nothing."""
    share = registry.lookup(policy).reserved_share
    if share <= 0 or not queues:
        return {}
    each = math.floor(share / len(queues) * 10000) / 100
    return {q: {"min": each} for q in queues}


class ControllerPolicy:
    """One registered queue policy through the controller's decide and plan steps."""

    def __init__(
        self,
        policy: str,
        queues: Sequence[str],
        params: Mapping[str, Any] | None = None,
        weights: Mapping[str, float] | None = None,
        interval_s: float = 60.0,
        container_mb: int = 1024,
        max_step_pp: float = MAX_STEP_PP,
        min_change_pp: float = MIN_CHANGE_PP,
        bounds: Mapping[str, Any] | None = None,
    ) -> None:
        self.queues = sorted(queues)
        self.cfg = config.resolve(
            policy=policy,
            params=dict(params or {}),
            mode="enforce",
            bounds=dict(bounds) if bounds is not None else reserved_bounds(policy, self.queues),
            weights=dict(weights or {}),
            max_step_pp=max_step_pp,
            min_change_pp=min_change_pp,
            allow_drift_overwrite=True,
            managed_parent="root",
            interval_s=interval_s,
        )
        self.name = self.cfg.policy
        self.interval_s = interval_s
        spec = registry.lookup(self.cfg.policy)
        self.needs = frozenset(spec.needs(self.cfg.params) if spec.needs is not None else ())
        self.container_mb = container_mb
        self.ledger = LedgerState()
        # The ledger's weights, discount and lending rule: the configuration fixes them.
        self._weights = {q: self.cfg.weight(q) for q in self.queues}
        self._discount = float(self.cfg.params.get("discount", 1.0))
        self._lending = str(self.cfg.params.get("lending", "used"))
        self.state: Mapping[str, Any] = {}
        self._floors: dict[tuple[float, float], control_floors.Floors] = {}  # by cluster size
        self._last_t: float | None = None
        # ``plan_outcome`` is a pure function of the shares, the live values and the cluster's
        # size (the rest is fixed by the configuration), and policies such as LTRF decide the
        # same shares tick after tick: most ticks are a plan already made.
        self._plans: dict[_PlanKey, Plan] = {}
        # What the simulated CapacityScheduler holds: equal capacities summing to exactly 100 until
        # the first plan is applied, as the live queues hold before the controller's first push.
        equal = capacity_hundredths({q: 1.0 for q in self.queues}, {})
        self.live: dict[str, dict[str, str]] = {
            q: {"capacity": format_hundredths(h), "maximum-capacity": "100.00"}
            for q, h in equal.items()
        }

    def decide(
        self, now: float, observed: Mapping[str, QueueObservation], capacity: int
    ) -> QueueDecision:
        """Advance the ledger over the interval just ended, then decide and plan as the
        controller does, and apply the plan to the simulated scheduler."""
        mb = float(self.container_mb)
        total = ClusterTotals(float(capacity), float(capacity) * mb)
        self._account(now, observed, total)
        inputs = PolicyInputs(
            now_ms=int(now * 1000),
            window_start_ms=int((now - self.interval_s) * 1000),
            interval_s=self.interval_s,
            total=total,
            queues={q: _queue_inputs(observed.get(q), mb) for q in self.queues},
        )
        outcome = run_policy(self.cfg, inputs, self.queues, self.state, self.ledger)
        if outcome.state is not None:
            self.state = outcome.state
        cluster = {"vcores": total.vcores, "memory": total.memory_mb}
        floors = self._floors_for(total)
        key = _plan_key(outcome, self.live, cluster)
        step = self._plans.get(key) if key is not None else None
        if step is None:
            step = plan_outcome(
                outcome,
                self.live,
                bounds=self.cfg.bounds,
                max_step_pp=self.cfg.max_step_pp,
                min_change_pp=self.cfg.min_change_pp,
                total=cluster,
                floors=floors,
            )
            if key is not None:
                if len(self._plans) >= _PLANS_KEPT:
                    self._plans.clear()
                self._plans[key] = step
        if step.push:
            self.live = step.expected()
        shares = self._fractions("capacity", capacity)
        maxes = self._fractions("maximum-capacity", capacity)
        if outcome.fair_weights is not None:
            fair = dict(outcome.fair_weights)
        else:
            fair = {q: s for q, s in shares.items() if _busy(observed.get(q))}
        return QueueDecision(shares, maxes, fair)

    def _floors_for(self, total: ClusterTotals) -> control_floors.Floors:
        """The controller's minimum shares, with the simulated container as the scheduler's
        minimum allocation: a what-if starves no queue the live controller would not. They
        depend on the cluster's size only, so they are computed once per size, not per tick."""
        size = (total.vcores, total.memory_mb)
        floors = self._floors.get(size)
        if floors is None:
            floors = self._floors[size] = control_floors.compute(
                self.queues,
                self.cfg.floors,
                control_floors.Amount(1, self.container_mb),
                "simulated container",
                control_floors.Amount(total.vcores, total.memory_mb),
                self.cfg.bounds,
            )
        return floors

    def _account(
        self, now: float, observed: Mapping[str, QueueObservation], total: ClusterTotals
    ) -> None:
        """The interval's mean usage held over ``[last, now)``: one rectangle of
        ``app.control.ledger.integrate`` (``ledger.rectangle``)."""
        if self._last_t is not None and now > self._last_t:
            points = self._points(self._last_t, observed)
            start_ms = int(self._last_t * 1000)
            dt_ms = int(now * 1000) - start_ms
            # ``integrate`` over these two polls is this one rectangle; its rows (a tenth of a
            # tick's time) are not read here.
            if 0 < dt_ms <= _NO_GAP_LIMIT_MS:
                self.ledger = rectangle(
                    self.ledger,
                    Poll(start_ms, total, points),
                    dt_ms / 1000,
                    self._weights,
                    self._discount,
                    self._lending,
                )[0]
        self._last_t = now

    def _points(self, t: float, observed: Mapping[str, QueueObservation]) -> dict[str, SamplePoint]:
        """The controlled queues' usage at ``t`` as the live poller records it."""
        return {
            q: SamplePoint(
                taken_ms=int(t * 1000),
                used_vcores=o.used_vcores,
                pending_vcores=max(0.0, o.demand_vcores - o.used_vcores),
            )
            for q, o in observed.items()
            if q in self.queues
        }

    def _fractions(self, key: str, capacity: int) -> dict[str, float]:
        """A value the simulated scheduler holds per queue, as a fraction of the cluster."""
        out = {}
        for q, values in self.live.items():
            value = values.get(key, "100.00")
            out[q] = _vcores(value) / capacity if value.startswith("[") else float(value) / 100
        return out


_PlanKey = tuple[object, ...]
_PLANS_KEPT = 64  # a bound on memory; LTRF repeats recent plans, so a miss is rare


def _plan_key(
    outcome: PolicyOutcome, live: Mapping[str, Mapping[str, str]], cluster: Mapping[str, float]
) -> _PlanKey | None:
    """What ``plan_outcome`` reads of a percentage outcome, as a dictionary key; None for any
    other outcome (absolute amounts, no shares), which is planned every time. Shares are keyed
    by their exact bits (``float.hex``): ``-0.0 == 0.0`` but is not the same input."""
    if outcome.amounts is not None or outcome.shares is None:
        return None
    return (
        tuple((q, s.hex()) for q, s in outcome.shares.items()),
        tuple((q, tuple(values.items())) for q, values in live.items()),
        outcome.no_borrowing,
        outcome.min_change_applies,
        cluster["vcores"],
        cluster["memory"],
    )


def _busy(o: QueueObservation | None) -> bool:
    return o is not None and (o.demand_vcores > 0 or o.used_vcores > 0)


_VCORES = re.compile(r"vcores=(\d+)")


def _vcores(absolute: str) -> float:
    """The vcores of a CapacityScheduler absolute resource ``[memory=M,vcores=N]``."""
    m = _VCORES.search(absolute)
    if m is None:
        raise ValueError(f"no vcores in {absolute!r}")
    return float(m.group(1))


def _queue_inputs(o: QueueObservation | None, mb: float) -> QueueInputs:
    if o is None:
        return QueueInputs(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0)
    pending = max(0.0, o.demand_vcores - o.used_vcores)
    return QueueInputs(
        samples=1,
        used_vcores=o.used_vcores,
        used_memory_mb=o.used_vcores * mb,
        pending_vcores=pending,
        pending_memory_mb=pending * mb,
        pending_containers=o.waiting_tasks,
        pending_apps=float(o.waiting_jobs),
        running_apps=float(o.running_jobs),
        used_fraction=o.used_fraction,
        vcore_utilization=o.utilization,
        # One container size for every job: memory use is proportional to vcore use.
        memory_utilization=o.utilization,
        completed_apps=o.completed_jobs,
        waiting_input_bytes=o.waiting_input_bytes,
        completed_tasks=float(o.completed_tasks),
        slowdowns=o.slowdowns,
    )


def make_queue_policy(
    name: str,
    queues: Sequence[str],
    params: Mapping[str, Any] | None = None,
    *,
    interval_s: float = 60.0,
    container_mb: int = 1024,
    plan: PlanSettings | None = None,
) -> ControllerPolicy:
    """The controller named ``name`` (``queue_policy_names()``) for ``queues``."""
    if name not in queue_policy_names():
        known = ", ".join(queue_policy_names())
        raise ValueError(f"unknown queue policy {name!r}; use one of {known}")
    limits = plan or PlanSettings()
    return ControllerPolicy(
        name,
        queues,
        params,
        interval_s=interval_s,
        container_mb=container_mb,
        max_step_pp=limits.max_step_pp,
        min_change_pp=limits.min_change_pp,
    )
