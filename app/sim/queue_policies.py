"""Queue policies as simulator controllers over the sidecar's own policy code.

* ``fawkes:<W>`` for the nine weightings JD, DD, TD, PU, DU, RU, JS, JT, TT and the baselines
  ``fawkes:EQ`` and ``fawkes:None`` (seed 000, sections 4.2, 4.3): ``app.policies.fawkes.step`` is
  called directly with the full per-queue sample, because the simulator knows what the RM does
  not report (input bytes of waiting jobs for DD, completed tasks for TT, slowdowns for JS);
  the live controller's ``app.control.decide.run_fawkes`` sets those to 0.
* ``ltrf``, ``mlrf`` and ``rrf`` (seed 002, sections 9.4, 9.5) go through
  ``app.control.decide.run_policy``, the controller's decide step, with the configuration built by
  ``app.control.config.resolve``. The LTRF ledger integrates *measured* usage per interval with
  ``ltrf.account_usage`` and ``ltrf.entitlements``, as ``app.control.ledger`` does per poll.

Shares become CapacityScheduler capacities with maximum-capacity 100% (YARN lends idle capacity),
except ``fawkes:None``, whose queues "run permanently on their minimum shares" (section 4.3), so
their maximum equals their share. Inputs per queue are the runner's ``QueueObservation``s: interval
mean of used vcores, instantaneous waiting jobs/tasks (one sample per interval).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.control import config, decide
from app.control import floors as control_floors
from app.control.budget import format_hundredths
from app.control.plan import plan_outcome
from app.domain.observation import ClusterTotals, PolicyInputs, QueueInputs
from app.policies import registry
from app.policies.fawkes import core as fawkes
from app.policies.ltrf import core as ltrf
from app.policies.rounding import capacity_hundredths
from app.sim.runner import QueueDecision, QueueObservation

# The controller's defaults (``Settings.max_step_pp`` / ``min_change_pp``), so a what-if moves
# shares as the sidecar would.
MAX_STEP_PP = 10.0
MIN_CHANGE_PP = 1.0


@dataclass(frozen=True, slots=True)
class PlanSettings:
    """The controller's plan limits as simulator options (``--max-step-pp``,
    ``--min-change-pp``); defaults are the controller's."""

    max_step_pp: float = MAX_STEP_PP
    min_change_pp: float = MIN_CHANGE_PP


# Every registered queue policy but Fawkes (which the simulator feeds its richer samples) runs
# through the controller's own decide step.
CONTROLLER_POLICIES = tuple(n for n in registry.names("queue") if n != "fawkes")


def fawkes_names() -> list[str]:
    """``fawkes:<weighting>`` for every weighting of the policy module."""
    return [f"fawkes:{w}" for w in fawkes.WEIGHTINGS]


def queue_policy_names() -> list[str]:
    """Every queue policy the simulator can run."""
    return [*fawkes_names(), *CONTROLLER_POLICIES]


def default_min_shares(queues: Sequence[str]) -> dict[str, float]:
    """Half the cluster reserved as equal minimum shares (Fawkes' core nodes, section 7.3 gives
    each of three clusters 10 of 48 nodes, about 0.2)."""
    return {q: 0.5 / len(queues) for q in queues} if queues else {}


class FawkesController:
    """``fawkes.step`` every ``interval_s`` with the simulator's samples."""

    def __init__(
        self,
        weighting: str,
        queues: Sequence[str],
        params: Mapping[str, Any] | None = None,
        min_shares: Mapping[str, float] | None = None,
    ) -> None:
        values = {**(params or {}), "weighting": weighting}
        mins = dict(min_shares) if min_shares is not None else default_min_shares(queues)
        self.params = fawkes.FawkesParams.from_values(values, min_shares=mins)
        self.name = f"fawkes:{weighting}"
        self.interval_s = self.params.interval_s
        self.state = fawkes.FawkesState()
        self.last: fawkes.FawkesDecision | None = None

    def decide(
        self, now: float, observed: Mapping[str, QueueObservation], capacity: int
    ) -> QueueDecision:
        """One Fawkes tick."""
        tick = fawkes.FawkesTick(now, {q: _sample(o) for q, o in observed.items()})
        decision, self.state = fawkes.step(self.state, tick, self.params)
        self.last = decision
        shares = dict(decision.shares)
        static = self.params.weighting == "None"
        maxes = {q: (s if static else 1.0) for q, s in shares.items()}
        return QueueDecision(shares, maxes, dict(decision.weights))


def _sample(o: QueueObservation) -> fawkes.QueueSample:
    return fawkes.QueueSample(
        waiting_jobs=float(o.waiting_jobs),
        waiting_tasks=o.waiting_tasks,
        waiting_input_bytes=o.waiting_input_bytes,
        running_jobs=float(o.running_jobs),
        used_fraction=min(1.0, o.used_fraction),
        vcore_utilization=o.utilization,
        # One container size for every job: memory use is proportional to vcore use.
        memory_utilization=o.utilization,
        completed_jobs=float(o.completed_jobs),
        completed_tasks=float(o.completed_tasks),
        slowdowns=o.slowdowns,
    )


class ControllerPolicy:
    """LTRF, MLRF or RRF through the live controller's ``decide.run_policy``."""

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
    ) -> None:
        self.cfg = config.resolve(
            policy=policy,
            params=dict(params or {}),
            mode="enforce",
            bounds={},
            weights=dict(weights or {}),
            max_step_pp=max_step_pp,
            min_change_pp=min_change_pp,
            allow_drift_overwrite=True,
            managed_parent="root",
            interval_s=interval_s,
        )
        self.name = self.cfg.policy
        self.interval_s = interval_s
        self.queues = list(queues)
        self.container_mb = container_mb
        self.ledger = ltrf.LtrfState()
        self._entitled: dict[str, float] = {}
        self._last_t: float | None = None
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
        """Integrate the interval's measured usage, then run the controller's decide step."""
        self._account(now, observed, capacity)
        inputs = self._inputs(now, observed, capacity)
        outcome = decide.run_policy(self.cfg, inputs, self.queues, {}, self.ledger)
        total = {"vcores": float(capacity), "memory": float(capacity) * self.container_mb}
        # The controller's minimum shares, with the simulated container as the scheduler's
        # minimum allocation: a what-if starves no queue the live controller would not.
        floors = control_floors.compute(
            sorted(self.live),
            self.cfg.floors,
            control_floors.Amount(1, self.container_mb),
            "simulated container",
            control_floors.Amount(total["vcores"], total["memory"]),
            self.cfg.bounds,
        )
        step = plan_outcome(
            outcome,
            self.live,
            bounds=self.cfg.bounds,
            max_step_pp=self.cfg.max_step_pp,
            min_change_pp=self.cfg.min_change_pp,
            total=total,
            floors=floors,
        )
        if step.push:
            self.live = step.expected()
        shares = self._shares(capacity)
        weights = {q: self.cfg.weight(q) for q in self.queues}
        self._entitled = ltrf.entitlements(weights, self._members(observed), float(capacity))
        active = {q: s for q, s in shares.items() if _busy(observed.get(q))}
        return QueueDecision(shares, {q: 1.0 for q in shares}, active)

    def _members(self, observed: Mapping[str, QueueObservation]) -> list[str]:
        return [
            q for q in self.queues if _busy(observed.get(q)) or self.ledger.counted.get(q, 0.0) > 0
        ]

    def _account(self, now: float, observed: Mapping[str, QueueObservation], capacity: int) -> None:
        if self._last_t is not None and now > self._last_t:
            used = {q: observed[q].used_vcores if q in observed else 0.0 for q in self.queues}
            discount = float(self.cfg.params.get("discount", 1.0))
            self.ledger = ltrf.account_usage(
                self.ledger, used, self._entitled, now - self._last_t, discount
            )
        self._last_t = now

    def _inputs(
        self, now: float, observed: Mapping[str, QueueObservation], capacity: int
    ) -> PolicyInputs:
        mb = float(self.container_mb)
        queues = {q: _queue_inputs(observed.get(q), mb) for q in self.queues}
        return PolicyInputs(
            now_ms=int(now * 1000),
            window_start_ms=int((now - self.interval_s) * 1000),
            interval_s=self.interval_s,
            total=ClusterTotals(float(capacity), float(capacity) * mb),
            queues=queues,
        )

    def _shares(self, capacity: int) -> dict[str, float]:
        """The capacities the simulated scheduler holds, as fractions of the cluster."""
        out = {}
        for q, values in self.live.items():
            value = values["capacity"]
            out[q] = _vcores(value) / capacity if value.startswith("[") else float(value) / 100
        return out


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
        memory_utilization=o.utilization,
        completed_apps=o.completed_jobs,
    )


def make_queue_policy(
    name: str,
    queues: Sequence[str],
    params: Mapping[str, Any] | None = None,
    *,
    interval_s: float = 60.0,
    container_mb: int = 1024,
    plan: PlanSettings | None = None,
) -> FawkesController | ControllerPolicy:
    """The controller named ``name`` (``queue_policy_names()``) for ``queues``."""
    if name.startswith("fawkes:"):
        values = {"interval_s": interval_s, **(params or {})}
        return FawkesController(name.split(":", 1)[1], queues, values)
    if name in CONTROLLER_POLICIES:
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
    raise ValueError(f"unknown queue policy {name!r}; use one of {', '.join(queue_policy_names())}")
