"""Long-Term Resource Fairness and its memoryless baseline (seed 002, section 9.4.1 to 9.4.4;
``docs/policies.md``, "Long-Term Resource Fairness").

Each round water-fills the capacity ``R`` continuously over the queues with remaining demand,
always raising the queue with the smallest counted usage per weight ``u_i / w_i``. A queue's counted
usage rises by 1 per unit of round allocation up to its entitlement ``e_i = w_i / sum w * R`` and by
``delta`` (the discount) beyond it; it stops at its demand. Every queue's allocation is a
piecewise-linear function of the common level ``L = u_i / w_i``, so ``allocate`` sorts the
breakpoints and solves the level that uses ``R`` exactly (no small-step simulation). Ties
advance together because they share the level. MLRF is the same water-fill with ``u_i = 0`` every
round and no discount (Table 9.2 (a)).

Two registry entries: ``ltrf`` (parameter ``discount``) and ``mlrf`` (none).

Decisions where the paper and ``docs/policies.md`` are silent:

* "Queues with demand or usage" (who is entitled): a queue with demand this round or with positive
  cumulative counted usage. A queue that used resources once and is idle now keeps its entitlement,
  so it keeps lending (its debt grows) - that is the loan agreement.
* ``delta`` is in (0, 1]: 0 would make borrowing free and the level would never rise.
* Queues in the state but absent from ``weights`` are carried over unchanged (a live controller may
  stop managing a queue without losing its ledger).
* ``counted`` in a round result is the round's counted increment; for MLRF it equals ``alloc``.
* Live use: the controller integrates *measured* usage with ``account_usage`` (resource x seconds)
  and plans with ``allocate(state.counted, demand, ..., horizon_s=interval)``: the planned
  allocation holds for the next interval, so it counts ``x * horizon_s`` against ``u_i`` and the
  level compares like units. ``shares_from_alloc`` turns the plan into shares for YARN.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.policies.base import ParamSpec, PolicyError, PolicySpec
from app.policies.base import finite_number as _number

_DISCOUNT = ParamSpec(
    "discount",
    float,
    1.0,
    "delta: counted usage per unit allocated beyond the entitlement (1 = no discount)",
    minimum=0.0,
    maximum=1.0,
    exclusive_minimum=True,
)

_LENDING = ParamSpec(
    "lending",
    str,
    "used",
    "what the live ledger counts as lent: 'used' (only what another queue used beyond its "
    "entitlement) or 'entitlement' (all unused entitlement, used or not)",
    choices=("used", "entitlement"),
)

REGISTRY: tuple[PolicySpec, ...] = (
    PolicySpec(
        name="ltrf",
        kind="queue",
        summary="long-term fairness: serve the smallest cumulative counted usage per weight first",
        paper="seed 002 (Tang et al., chapter 9), section 9.4.3, Algorithm 1, Table 9.2",
        params=(_DISCOUNT, _LENDING),
    ),
    PolicySpec(
        name="mlrf",
        kind="queue",
        summary="memoryless weighted max-min fairness each round (the LTRF baseline)",
        paper="seed 002 (Tang et al., chapter 9), section 9.4.2, Table 9.2 (a)",
        params=(),
    ),
)


def _validate_discount(value: Any) -> float:
    return float(_DISCOUNT.validate(value))


@dataclass(frozen=True, slots=True)
class LtrfParams:
    """``discount`` is ``delta``; ``memoryless`` selects MLRF (which ignores the discount)."""

    discount: float = 1.0
    memoryless: bool = False

    def __post_init__(self) -> None:
        _validate_discount(self.discount)
        if not isinstance(self.memoryless, bool):
            raise PolicyError("memoryless", f"must be true or false, got {self.memoryless!r}")


@dataclass(frozen=True, slots=True)
class LtrfState:
    """The ledger per queue. Treat the mappings as read-only."""

    counted: Mapping[str, float] = field(default_factory=dict)  # u_i, cumulative counted usage
    demand: Mapping[str, float] = field(default_factory=dict)  # demand carried to the next round
    debt: Mapping[str, float] = field(default_factory=dict)  # sum(e_i - alloc_i); > 0: lent
    total_alloc: Mapping[str, float] = field(default_factory=dict)  # sum(alloc_i), real usage
    rounds: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "counted": dict(self.counted),
            "demand": dict(self.demand),
            "debt": dict(self.debt),
            "total_alloc": dict(self.total_alloc),
            "rounds": self.rounds,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LtrfState:
        """Inverse of ``to_dict``."""

        def floats(key: str) -> dict[str, float]:
            return {k: float(v) for k, v in data.get(key, {}).items()}

        return cls(
            counted=floats("counted"),
            demand=floats("demand"),
            debt=floats("debt"),
            total_alloc=floats("total_alloc"),
            rounds=int(data.get("rounds", 0)),
        )


@dataclass(frozen=True, slots=True)
class RoundResult:
    """One round: total demand, entitlement, allocation, counted increment and the ledger after."""

    demand: Mapping[str, float]
    entitlement: Mapping[str, float]
    alloc: Mapping[str, float]
    counted: Mapping[str, float]
    total_counted: Mapping[str, float]
    debt: Mapping[str, float]
    total_alloc: Mapping[str, float]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (plain floats)."""
        return {
            "demand": dict(self.demand),
            "entitlement": dict(self.entitlement),
            "alloc": dict(self.alloc),
            "counted": dict(self.counted),
            "total_counted": dict(self.total_counted),
            "debt": dict(self.debt),
            "total_alloc": dict(self.total_alloc),
        }


# --- the continuous water-fill ------------------------------------------------------------------


def counted_amount(x: float, entitlement: float, discount: float) -> float:
    """Counted usage of an allocation ``x``: 1 per unit within ``entitlement``, ``delta`` beyond."""
    within = min(x, entitlement)
    return within + discount * max(0.0, x - entitlement)


@dataclass(frozen=True, slots=True)
class _Curve:
    """A queue's allocation as a function of the level ``L``: 0 up to ``start``, then slope
    ``w/h`` until the entitlement is used, then ``w/(h delta)`` until the demand is met."""

    u: float
    w: float
    demand: float
    within: float  # min(entitlement, demand)
    h: float
    discount: float

    @property
    def start(self) -> float:
        return self.u / self.w

    @property
    def knee(self) -> float:
        return (self.u + self.h * self.within) / self.w

    @property
    def end(self) -> float:
        counted = counted_amount(self.demand, self.within, self.discount)
        return (self.u + self.h * counted) / self.w

    def at(self, level: float) -> float:
        if level <= self.start:
            return 0.0
        if level <= self.knee:
            return min(self.within, (level * self.w - self.u) / self.h)
        beyond = (level * self.w - self.u - self.h * self.within) / (self.h * self.discount)
        return min(self.demand, self.within + beyond)

    def events(self) -> list[tuple[float, float]]:
        """(level, change of dX/dL) where the slope of this curve changes."""
        first = self.w / self.h
        if self.within >= self.demand:
            return [(self.start, first), (self.knee, -first)]
        second = first / self.discount
        return [(self.start, first), (self.knee, second - first), (self.end, -second)]


def _level(curves: Iterable[_Curve], capacity: float) -> float:
    """The level at which the curves' allocations sum to ``capacity`` (total demand exceeds it)."""
    events = sorted(e for c in curves for e in c.events())
    level, used, slope = events[0][0], 0.0, 0.0
    for at, change in events:
        if slope > 0 and used + slope * (at - level) >= capacity:
            return level + (capacity - used) / slope
        used += slope * (at - level)
        level, slope = at, slope + change
    return level


def allocate(
    counted: Mapping[str, float],
    demand: Mapping[str, float],
    capacity: float,
    weights: Mapping[str, float],
    entitlement: Mapping[str, float],
    discount: float = 1.0,
    horizon_s: float = 1.0,
) -> dict[str, float]:
    """One continuous LTRF water-fill of ``capacity`` (inputs assumed validated).

    ``counted`` is ``u_i`` (missing: 0), ``demand`` the round's total demand per queue (queues of
    ``weights``), ``entitlement`` ``e_i``. Every queue of ``weights`` appears in the result.
    """
    out = {q: 0.0 for q in weights}
    wanting = {q: d for q, d in demand.items() if d > 0}
    if sum(wanting.values()) <= capacity:
        out.update(wanting)
        return out
    curves = {
        q: _Curve(
            u=counted.get(q, 0.0),
            w=weights[q],
            demand=d,
            within=min(entitlement.get(q, 0.0), d),
            h=horizon_s,
            discount=discount,
        )
        for q, d in wanting.items()
    }
    level = _level(curves.values(), capacity)
    out.update({q: c.at(level) for q, c in curves.items()})
    return out


def entitlements(
    weights: Mapping[str, float], participants: Iterable[str], capacity: float
) -> dict[str, float]:
    """``e_i = w_i / sum_k w_k * R`` over ``participants``; 0 for the other queues."""
    members = set(participants)
    total = sum(w for q, w in weights.items() if q in members)
    return {
        q: (w / total * capacity if q in members and total > 0 else 0.0) for q, w in weights.items()
    }


# --- rounds -------------------------------------------------------------------------------------


def _validate_round(
    new_demand: Mapping[str, float], capacity: float, weights: Mapping[str, float]
) -> None:
    _number(capacity, "capacity")
    if not weights:
        raise PolicyError("weights", "at least one queue is needed")
    for q, w in weights.items():
        _number(w, f"weights.{q}", positive=True)
    for q, d in new_demand.items():
        if q not in weights:
            raise PolicyError(f"new_demand.{q}", "names a queue without a weight")
        _number(d, f"new_demand.{q}")


# Named ``round`` on purpose (shadows the builtin here only); callers use ``ltrf.round``.
def round(
    state: LtrfState,
    new_demand: Mapping[str, float],
    capacity: float,
    weights: Mapping[str, float],
    params: LtrfParams,
) -> tuple[RoundResult, LtrfState]:
    """One round of LTRF (or MLRF): carry demand over, water-fill, update the ledger."""
    _validate_round(new_demand, capacity, weights)
    demand = {q: state.demand.get(q, 0.0) + new_demand.get(q, 0.0) for q in weights}
    participants = [q for q in weights if demand[q] > 0 or state.counted.get(q, 0.0) > 0]
    ent = entitlements(weights, participants, capacity)
    discount = 1.0 if params.memoryless else params.discount
    history = {} if params.memoryless else state.counted
    alloc = allocate(history, demand, capacity, weights, ent, discount)
    counted = {q: counted_amount(alloc[q], ent[q], discount) for q in weights}
    new_state = LtrfState(
        counted=_add(state.counted, counted),
        demand={**state.demand, **{q: max(0.0, demand[q] - alloc[q]) for q in weights}},
        debt=_add(state.debt, {q: ent[q] - alloc[q] for q in weights}),
        total_alloc=_add(state.total_alloc, alloc),
        rounds=state.rounds + 1,
    )
    result = RoundResult(
        demand=demand,
        entitlement=ent,
        alloc=alloc,
        counted=counted,
        total_counted={q: new_state.counted[q] for q in weights},
        debt={q: new_state.debt[q] for q in weights},
        total_alloc={q: new_state.total_alloc[q] for q in weights},
    )
    return result, new_state


def _add(base: Mapping[str, float], delta: Mapping[str, float]) -> dict[str, float]:
    out = dict(base)
    for q, v in delta.items():
        out[q] = out.get(q, 0.0) + v
    return out


# --- live controller ----------------------------------------------------------------------------


def account_usage(
    state: LtrfState,
    used: Mapping[str, float],
    entitlement: Mapping[str, float],
    dt_s: float,
    discount: float,
    debt_rate: Mapping[str, float] | None = None,
) -> LtrfState:
    """Integrate *measured* usage over ``dt_s`` seconds into counted usage, debt and totals.

    ``used`` and ``entitlement`` are in resource units (e.g. vcores); a queue missing from ``used``
    used nothing, one missing from ``entitlement`` is entitled to nothing. Demand is not touched:
    the live controller observes demand instead of carrying it. ``debt_rate`` (lent minus
    borrowed per queue, ``app.control.lending``) replaces ``entitlement - used`` as the debt's
    rate when given.
    """
    _number(dt_s, "dt_s")
    _validate_discount(discount)
    for q, u in used.items():
        _number(u, f"used.{q}")
    for q, e in entitlement.items():
        _number(e, f"entitlement.{q}")
    names = set(used) | set(entitlement)
    use = {q: used.get(q, 0.0) for q in names}
    ent = {q: entitlement.get(q, 0.0) for q in names}
    return LtrfState(
        counted=_add(
            state.counted, {q: dt_s * counted_amount(use[q], ent[q], discount) for q in names}
        ),
        demand=dict(state.demand),
        debt=_add(
            state.debt,
            {
                q: dt_s * (ent[q] - use[q] if debt_rate is None else debt_rate.get(q, 0.0))
                for q in names
            },
        ),
        total_alloc=_add(state.total_alloc, {q: dt_s * use[q] for q in names}),
        rounds=state.rounds + 1,
    )


def shares_from_alloc(
    alloc: Mapping[str, float], weights: Mapping[str, float], capacity: float
) -> dict[str, float]:
    """``alloc_i / R`` plus the unallocated rest of ``R`` spread by weight; sums to 1."""
    _number(capacity, "capacity", positive=True)
    for q, w in weights.items():
        _number(w, f"weights.{q}", positive=True)
    for q, a in alloc.items():
        if q not in weights:
            raise PolicyError(f"alloc.{q}", "names a queue without a weight")
        _number(a, f"alloc.{q}")
    total = sum(alloc.values())
    if total > capacity * (1 + 1e-9):
        raise PolicyError("alloc", f"allocations sum to {total}, more than capacity {capacity}")
    rest = max(0.0, 1.0 - total / capacity)
    weight_sum = sum(weights.values())
    return {q: alloc.get(q, 0.0) / capacity + rest * w / weight_sum for q, w in weights.items()}
