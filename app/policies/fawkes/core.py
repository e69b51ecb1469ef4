"""Fawkes: balanced shares for queues with dynamic weights (seed 000, sections 3, 4.1 to 4.3, 7;
``docs/policies.md``, "Fawkes weights").

Queues play the paper's MR-clusters. Every control tick carries, per queue, the samples averaged
over the last interval ``T``; ``step`` turns them into weights (eq. 4), integrates the
discrimination ``D_i`` (eqs. 1, 2), computes the global discrimination factor (eq. 3) and, only
when it exceeds ``tau``, water-fills new shares ``s_i = max(m_i, lambda * w_i)``.

One registry entry, ``fawkes``, with a ``weighting`` choice parameter (JD, DD, TD, PU, DU, RU, JS,
JT, TT and the baselines EQ, None): the weightings share all other parameters and state, so one
spec keeps the controller's configuration to a single policy name.

Decisions where the paper and ``docs/policies.md`` are silent:

* Defaults: ``tau`` 10 (the ``docs/policies.md`` scenario; the paper gives no number; ``D_i`` is in
  share x seconds, so ``tau`` is in share^2 x s^2), ``T`` 60 s (section 7.1), ``psi`` 0.5, ``a`` 2.
* *Busy* (the "running or waiting job" of the activity rule) means ``running_jobs``,
  ``waiting_jobs`` or ``waiting_tasks`` is positive in the tick's averaged samples. A queue is idle
  for longer than ``T`` when ``t - last_busy > T`` (strictly), and is then deactivated.
* Order inside a tick: deactivate idle queues, append newly busy queues to the FIFO (several in
  one tick: by name), drop waiting queues idle for longer than ``T``, admit from the head while
  it fits (strict FIFO: a head that does not fit blocks the queues behind it, section 4.2.1).
* Floors: an inactive queue keeps its floor share (default 0). Floors are reserved, so admission
  checks ``sum(m_i, admitted and candidate) + sum(floor_j, all others) <= 1`` and the admitted
  shares sum to ``1 - sum(floor_j, not admitted)``; with the default floors of 0 this is exactly
  the ``docs/policies.md`` rule (minimums at most 1, admitted shares sum to 1). A floor may not
  exceed the queue's minimum share, so deactivation never over-commits the pool.
* ``D_i`` is 0 on the tick a queue is admitted (the integral over ``[activation, activation]``);
  afterwards it grows by ``(c_i - w_i) * (t_k - t_{k-1})`` with the tick's own averaged ``c_i`` and
  the weight computed on that tick (rectangle rule). ``D_i`` is never reset while the queue stays
  admitted (the paper integrates from deployment to removal); it is dropped on deactivation.
* Shares when the factor is at most ``tau``: the previous shares if the admitted set is unchanged.
  On the first decision, and whenever admission or deactivation changed the admitted set, the
  shares are water-filled from the current weights (the admitted set must sum to the pool, and
  section 4.2.1's shrink-proportionally-to-weights converges to that); ``rebalanced`` stays false
  then, and ``reason`` says why shares moved. ``rebalanced`` is true exactly when factor > tau.
* ``None``: weights are the minimum shares (not normalised) and shares stay at the minimums, so
  the admitted shares sum to ``sum(m_i)``; the rest of the pool is reported as ``unassigned``.
* Weights (eq. 4) are normalised over the *admitted* queues: a queue waiting in the FIFO has no
  share to balance yet, so it gets no weight and no ``D_i``.
* ``DU``: YARN does not report HDFS output per queue, so memory utilisation of the queue's
  capacity stands in for the paper's disk usage (and ``RU`` mixes vcores with memory).
* ``JS`` uses the mean of the listed slowdowns (0 when none). ``JT``/``TT``: ``a ** -q`` with
  ``q = completed / waiting``, 0 when nothing waits (eq. 6).
* Inactive queues only get their floor as *capacity*; keeping their ``maximum-capacity`` so they
  can still borrow is the actuator's job, not this module's.
* If parameters change under a live controller so that the admitted minimums exceed the pool, the
  minimums are scaled down proportionally to fit instead of failing the tick.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.policies.base import ParamSpec, PolicyError, PolicySpec
from app.policies.base import finite_number as _number

WEIGHTINGS: tuple[str, ...] = ("JD", "DD", "TD", "PU", "DU", "RU", "JS", "JT", "TT", "EQ", "None")
_EPS = 1e-9  # slack for float sums of minimum shares (5 x 0.2 is 1.0000000000000002)

_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("weighting", str, "TD", "weighting policy (seed 000 sec. 4.3)", choices=WEIGHTINGS),
    ParamSpec("tau", float, 10.0, "rebalance when mean D_i^2 exceeds this", minimum=0.0),
    ParamSpec(
        "psi",
        float,
        0.5,
        "RU mix of processor vs memory usage (eq. 5)",
        minimum=0.0,
        maximum=1.0,
        exclusive_minimum=True,
        exclusive_maximum=True,
    ),
    ParamSpec("a", float, 2.0, "JT/TT base of a**-q (eq. 6)", minimum=1.0, exclusive_minimum=True),
    ParamSpec(
        "interval_s",
        float,
        60.0,
        "T: averaging and idle interval",
        minimum=0.0,
        exclusive_minimum=True,
    ),
)

REGISTRY: tuple[PolicySpec, ...] = (
    PolicySpec(
        name="fawkes",
        kind="queue",
        summary="dynamic weights from demand, usage or performance; rebalance when discrimination "
        "exceeds tau",
        paper="seed 000 (Ghit et al., SIGMETRICS'14), sections 4.1 to 4.3",
        params=_PARAMS,
    ),
)


@dataclass(frozen=True, slots=True)
class QueueSample:
    """One queue's samples averaged over the last interval (``docs/policies.md`` weight table)."""

    waiting_jobs: float = 0.0
    waiting_tasks: float = 0.0
    waiting_input_bytes: float = 0.0
    running_jobs: float = 0.0
    used_fraction: float = 0.0
    vcore_utilization: float = 0.0
    memory_utilization: float = 0.0
    completed_jobs: float = 0.0
    completed_tasks: float = 0.0
    slowdowns: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for name in (
            "waiting_jobs",
            "waiting_tasks",
            "waiting_input_bytes",
            "running_jobs",
            "vcore_utilization",
            "memory_utilization",
            "completed_jobs",
            "completed_tasks",
        ):
            _number(getattr(self, name), name)
        _number(self.used_fraction, "used_fraction", high=1.0)
        for k, value in enumerate(self.slowdowns):
            _number(value, f"slowdowns[{k}]")

    @property
    def busy(self) -> bool:
        """A running or waiting job (or pending task) in the interval."""
        return self.running_jobs > 0 or self.waiting_jobs > 0 or self.waiting_tasks > 0


_IDLE = QueueSample()


@dataclass(frozen=True, slots=True)
class FawkesTick:
    """A control tick at ``t`` seconds with the interval's averaged samples per queue."""

    t: float
    queues: Mapping[str, QueueSample] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.t, bool) or not isinstance(self.t, int | float):
            raise PolicyError("t", f"must be a number, got {self.t!r}")
        if not math.isfinite(self.t):
            raise PolicyError("t", "must be finite")

    def sample(self, queue: str) -> QueueSample:
        """The queue's samples; a queue absent from the tick was idle."""
        return self.queues.get(queue, _IDLE)


@dataclass(frozen=True, slots=True)
class FawkesParams:
    """Validated parameters; bad values raise ``PolicyError`` naming the parameter."""

    weighting: str = "TD"
    tau: float = 10.0
    psi: float = 0.5
    a: float = 2.0
    interval_s: float = 60.0
    min_shares: Mapping[str, float] = field(default_factory=dict)
    floors: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for spec in _PARAMS:
            spec.validate(getattr(self, spec.name))
        for name, value in self.min_shares.items():
            _number(value, f"min_shares.{name}", high=1.0)
        for name, value in self.floors.items():
            _number(value, f"floors.{name}", high=self.min_share(name))
        if sum(self.floors.values()) > 1 + _EPS:
            raise PolicyError("floors", "floor shares sum to more than 1")

    @classmethod
    def from_values(
        cls,
        values: Mapping[str, Any],
        min_shares: Mapping[str, float] | None = None,
        floors: Mapping[str, float] | None = None,
    ) -> FawkesParams:
        """Registry defaults overlaid with ``values`` (unknown names are errors)."""
        merged = REGISTRY[0].validate(values)
        return cls(min_shares=dict(min_shares or {}), floors=dict(floors or {}), **merged)

    def min_share(self, queue: str) -> float:
        """``m_i``, 0 for a queue without a configured minimum."""
        return self.min_shares.get(queue, 0.0)

    def floor(self, queue: str) -> float:
        """The share an inactive queue keeps, 0 unless configured."""
        return self.floors.get(queue, 0.0)


@dataclass(frozen=True, slots=True)
class FawkesState:
    """What Fawkes remembers between ticks. Treat the mappings as read-only."""

    admitted: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    activated_at: Mapping[str, float] = field(default_factory=dict)
    last_busy: Mapping[str, float] = field(default_factory=dict)
    discrimination: Mapping[str, float] = field(default_factory=dict)
    shares: Mapping[str, float] = field(default_factory=dict)
    last_t: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "admitted": list(self.admitted),
            "waiting": list(self.waiting),
            "activated_at": dict(self.activated_at),
            "last_busy": dict(self.last_busy),
            "discrimination": dict(self.discrimination),
            "shares": dict(self.shares),
            "last_t": self.last_t,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FawkesState:
        """Inverse of ``to_dict``."""
        last_t = data.get("last_t")
        return cls(
            admitted=tuple(data.get("admitted", ())),
            waiting=tuple(data.get("waiting", ())),
            activated_at={k: float(v) for k, v in data.get("activated_at", {}).items()},
            last_busy={k: float(v) for k, v in data.get("last_busy", {}).items()},
            discrimination={k: float(v) for k, v in data.get("discrimination", {}).items()},
            shares={k: float(v) for k, v in data.get("shares", {}).items()},
            last_t=None if last_t is None else float(last_t),
        )


@dataclass(frozen=True, slots=True)
class FawkesDecision:
    """The outcome of one tick; ``shares`` covers every known queue (inactive ones at floor)."""

    t: float
    admitted: tuple[str, ...]
    waiting: tuple[str, ...]
    newly_admitted: tuple[str, ...]
    deactivated: tuple[str, ...]
    weights: Mapping[str, float]
    discrimination: Mapping[str, float]
    factor: float
    rebalanced: bool
    shares: Mapping[str, float]
    unassigned: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (plain floats, lists)."""
        return {
            "t": self.t,
            "admitted": list(self.admitted),
            "waiting": list(self.waiting),
            "newly_admitted": list(self.newly_admitted),
            "deactivated": list(self.deactivated),
            "weights": dict(self.weights),
            "discrimination": dict(self.discrimination),
            "factor": self.factor,
            "rebalanced": self.rebalanced,
            "shares": dict(self.shares),
            "unassigned": self.unassigned,
            "reason": self.reason,
        }


def raw_weight(sample: QueueSample, params: FawkesParams, queue: str) -> float:
    """The sample ``y_i`` of the configured weighting (``docs/policies.md`` weight table)."""
    w = params.weighting
    if w == "JD":
        return sample.waiting_jobs
    if w == "DD":
        return sample.waiting_input_bytes
    if w == "TD":
        return sample.waiting_tasks
    if w == "PU":
        return sample.vcore_utilization
    if w == "DU":
        return sample.memory_utilization
    if w == "RU":
        return params.psi * sample.vcore_utilization + (1 - params.psi) * sample.memory_utilization
    if w == "JS":
        return sum(sample.slowdowns) / len(sample.slowdowns) if sample.slowdowns else 0.0
    if w == "JT":
        return _throughput_weight(sample.completed_jobs, sample.waiting_jobs, params.a)
    if w == "TT":
        return _throughput_weight(sample.completed_tasks, sample.waiting_tasks, params.a)
    if w == "EQ":
        return 1.0
    return params.min_share(queue)  # None


def _throughput_weight(completed: float, waiting: float, a: float) -> float:
    # eq. (6): the slower a queue drains its backlog, the closer its weight gets to 1.
    return a ** (-(completed / waiting)) if waiting > 0 else 0.0


def weights(tick: FawkesTick, admitted: Iterable[str], params: FawkesParams) -> dict[str, float]:
    """``w_i`` over the admitted queues: eq. (4), EQ when all samples are 0, minimums for None."""
    names = list(admitted)
    raw = {q: raw_weight(tick.sample(q), params, q) for q in names}
    if params.weighting == "None":
        return raw
    total = sum(raw.values())
    if total <= 0:
        return {q: 1 / len(names) for q in names}
    return {q: y / total for q, y in raw.items()}


def water_fill(
    weights: Mapping[str, float], minimums: Mapping[str, float], total: float = 1.0
) -> dict[str, float]:
    """``s_i = max(m_i, lambda * w_i)`` with ``sum s_i = total``, ``lambda`` solved exactly.

    ``f(lambda) = sum max(m_i, lambda w_i)`` is piecewise linear with a breakpoint at
    ``m_i / w_i`` per queue; walking the breakpoints in order finds the segment holding the
    solution. If the minimums alone reach ``total`` they are scaled down to fit.
    """
    mins = {q: minimums.get(q, 0.0) for q in weights}
    floor_sum = sum(mins.values())
    if floor_sum >= total:
        scale = total / floor_sum if floor_sum > 0 else 0.0
        return {q: m * scale for q, m in mins.items()}
    raising = sorted((mins[q] / w, q) for q, w in weights.items() if w > 0)
    if not raising:
        raise PolicyError("weights", "at least one weight must be positive")
    lam = _solve_lambda(raising, weights, mins, total)
    return {q: max(mins[q], lam * weights[q]) for q in weights}


def _solve_lambda(
    raising: list[tuple[float, str]],
    weights: Mapping[str, float],
    mins: Mapping[str, float],
    total: float,
) -> float:
    at_min = sum(mins.values())  # sum of m_i of queues still held at their minimum
    raised_w = 0.0  # sum of w_i of queues already above their minimum
    for breakpoint, queue in raising:
        if raised_w > 0:
            lam = (total - at_min) / raised_w
            if lam <= breakpoint:
                return lam
        at_min -= mins[queue]
        raised_w += weights[queue]
    return (total - at_min) / raised_w


# --- one tick ---------------------------------------------------------------------------------


def _check_time(state: FawkesState, tick: FawkesTick) -> None:
    if state.last_t is not None and tick.t <= state.last_t:
        raise PolicyError("t", f"must be after the previous tick at {state.last_t}, got {tick.t}")


def _reserved(params: FawkesParams, admitted: Iterable[str]) -> float:
    """Minimums of ``admitted`` plus the floors every other queue keeps."""
    inside = set(admitted)
    floors = sum(f for q, f in params.floors.items() if q not in inside)
    return sum(params.min_share(q) for q in inside) + floors


@dataclass(frozen=True, slots=True)
class _Membership:
    admitted: tuple[str, ...]
    waiting: tuple[str, ...]
    newly_admitted: tuple[str, ...]
    deactivated: tuple[str, ...]
    last_busy: dict[str, float]


def _membership(state: FawkesState, tick: FawkesTick, params: FawkesParams) -> _Membership:
    """Section 4.2.1: deactivate idle queues, queue new ones FIFO, admit the head while it fits."""
    t, limit = tick.t, params.interval_s
    last_busy = dict(state.last_busy)
    for queue in sorted(tick.queues):
        if tick.queues[queue].busy:
            last_busy[queue] = t
    idle = {q for q, seen in last_busy.items() if t - seen > limit}
    deactivated = tuple(q for q in state.admitted if q in idle)
    admitted = [q for q in state.admitted if q not in idle]
    known = set(state.admitted) | set(state.waiting)
    arrivals = [q for q in sorted(tick.queues) if tick.queues[q].busy and q not in known]
    waiting = [q for q in (*state.waiting, *arrivals) if q not in idle]
    newly: list[str] = []
    while waiting and _reserved(params, [*admitted, *newly, waiting[0]]) <= 1 + _EPS:
        newly.append(waiting.pop(0))
    admitted.extend(newly)
    tracked = set(admitted) | set(waiting)
    return _Membership(
        admitted=tuple(admitted),
        waiting=tuple(waiting),
        newly_admitted=tuple(newly),
        deactivated=deactivated,
        last_busy={q: s for q, s in last_busy.items() if q in tracked},
    )


def _integrate(
    state: FawkesState,
    tick: FawkesTick,
    members: _Membership,
    current: Mapping[str, float],
) -> dict[str, float]:
    """``D_i += (c_i - w_i) * dt`` for queues admitted before this tick; 0 for new ones."""
    dt = 0.0 if state.last_t is None else tick.t - state.last_t
    out: dict[str, float] = {}
    for q in members.admitted:
        if q in members.newly_admitted:
            out[q] = 0.0
        else:
            used = tick.sample(q).used_fraction
            out[q] = state.discrimination.get(q, 0.0) + (used - current[q]) * dt
    return out


def _can_keep(state: FawkesState, admitted: tuple[str, ...], mins: Mapping[str, float]) -> bool:
    """Previous shares stay valid while the admitted set and the minimums they honour hold."""
    if state.last_t is None or set(state.shares) != set(admitted):
        return False
    return all(state.shares[q] >= m - _EPS for q, m in mins.items())


def _new_shares(
    state: FawkesState,
    members: _Membership,
    current: Mapping[str, float],
    factor: float,
    params: FawkesParams,
) -> tuple[dict[str, float], bool, str]:
    """Shares of the admitted queues, whether that was a rebalance, and why."""
    admitted = members.admitted
    if params.weighting == "None":
        return {q: params.min_share(q) for q in admitted}, False, "None keeps minimum shares"
    pool = 1.0 - sum(f for q, f in params.floors.items() if q not in set(admitted))
    mins = {q: params.min_share(q) for q in admitted}
    if factor > params.tau:
        return water_fill(current, mins, pool), True, f"factor {factor:g} > tau {params.tau:g}"
    if _can_keep(state, admitted, mins):
        return dict(state.shares), False, f"factor {factor:g} <= tau {params.tau:g}: kept shares"
    if not admitted:
        return {}, False, "no admitted queue"
    why = "first decision" if state.last_t is None else "admitted set changed"
    return water_fill(current, mins, pool), False, f"{why}: shares water-filled from weights"


def _all_queues(state: FawkesState, tick: FawkesTick, params: FawkesParams) -> list[str]:
    names = set(params.min_shares) | set(params.floors) | set(tick.queues)
    return sorted(names | set(state.admitted) | set(state.waiting))


def step(
    state: FawkesState, tick: FawkesTick, params: FawkesParams
) -> tuple[FawkesDecision, FawkesState]:
    """One control tick: membership, weights, discrimination, factor and (maybe) new shares."""
    _check_time(state, tick)
    members = _membership(state, tick, params)
    current = weights(tick, members.admitted, params)
    disc = _integrate(state, tick, members, current)
    factor = sum(d * d for d in disc.values()) / len(disc) if disc else 0.0
    admitted_shares, rebalanced, reason = _new_shares(state, members, current, factor, params)
    shares = {q: admitted_shares.get(q, params.floor(q)) for q in _all_queues(state, tick, params)}
    decision = FawkesDecision(
        t=tick.t,
        admitted=members.admitted,
        waiting=members.waiting,
        newly_admitted=members.newly_admitted,
        deactivated=members.deactivated,
        weights=current,
        discrimination=disc,
        factor=factor,
        rebalanced=rebalanced,
        shares=shares,
        unassigned=max(0.0, 1.0 - sum(shares.values())),
        reason=reason,
    )
    new_state = FawkesState(
        admitted=members.admitted,
        waiting=members.waiting,
        activated_at={q: state.activated_at.get(q, tick.t) for q in members.admitted},
        last_busy=members.last_busy,
        discrimination=disc,
        shares=admitted_shares,
        last_t=tick.t,
    )
    return decision, new_state
