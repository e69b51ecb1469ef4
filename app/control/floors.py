"""Minimum shares for every managed queue (seed 000, section 3: each MR-cluster has a minimum
share ``m_i`` the system guarantees; ``docs/policies.md``, "Fawkes weights": ``s_i = max(m_i,
...)``), sized from the live cluster so that no policy can leave a queue unable to start an
ApplicationMaster.

A queue's floor is the largest of:

* the operator's minimum bound (``bounds.<queue>.min``, percent of the parent);
* ``containers`` containers of the scheduler's minimum allocation
  (``yarn.scheduler.minimum-allocation-mb`` / ``-vcores``), default 2: one ApplicationMaster plus
  one task container, as a percentage of the parent's resources now (the running NodeManagers);
* for the deadline queue, the resources admission reserved for the grants it admitted.

Decisions where the papers and docs are silent:

* The percentage is rounded *up* to hundredths and, per resource, chosen so that
  ``floor(resource x capacity)`` still holds the containers: the CapacityScheduler rounds a
  queue's guaranteed resources down (a 1 % queue of 8 vcores is guaranteed 0 vcores and is
  preempted continuously, YARN-11073). The RM keeps capacities as Java floats, so a boundary
  like 70 % of 10 vcores (``0.7f * 10 = 6.9999998``) gets one more hundredth.
* ``floors`` maps queue paths (or ``"*"`` for every other queue) to a container count; ``0``
  turns the container floor off for that queue (the operator's bound still applies).
* A floor above the operator's maximum bound is cut to it: the bound is the operator's word.
* When the floors of all queues exceed 100 % (a cluster too small for every queue's
  ApplicationMaster), the part above the operator's minimums is scaled down in proportion so the
  floors sum to 100 %, and the decision says so.
* Unknown cluster size (no running NodeManager, e.g. while they re-register after an RM restart):
  container and admission floors cannot be sized; ``Floors.unsized`` names the queues that have
  one, and the plan then pushes nothing (``app.control.plan.plan_outcome``) rather than plan
  without them.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from app.control.budget import NO_BOUNDS, TOTAL, Bounds, format_hundredths, round_preserving_sum
from app.policies.base import PolicyError
from app.policies.base import finite_number as _number

DEFAULT_CONTAINERS = 2
"""One ApplicationMaster plus one task container."""

ANY_QUEUE = "*"
MAX_CONTAINERS = 10_000

# YARN's own defaults, used when the RM's configuration cannot be read.
DEFAULT_MIN_ALLOCATION_MB = 1024
DEFAULT_MIN_ALLOCATION_VCORES = 1


@dataclass(frozen=True, slots=True)
class Amount:
    """vcores and MB (the scheduler's minimum allocation, a reservation, a cluster's size)."""

    vcores: float
    memory_mb: float

    def times(self, count: int) -> Amount:
        """``count`` of these."""
        return Amount(self.vcores * count, self.memory_mb * count)

    def to_dict(self) -> dict[str, float]:
        """JSON form."""
        return {"vcores": self.vcores, "memory_mb": self.memory_mb}


def parse_floors(raw: Mapping[str, Any]) -> dict[str, int]:
    """``{"*": 2, "root.deadline": 3}`` -> container counts; errors name ``floors.<queue>``."""
    if not isinstance(raw, Mapping):
        raise PolicyError("floors", "must be an object mapping queue paths (or '*') to containers")
    out: dict[str, int] = {}
    for queue, value in raw.items():
        where = f"floors.{queue}"
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise PolicyError(where, f"must be a whole number of containers, got {value!r}")
        if not 0 <= value <= MAX_CONTAINERS:
            raise PolicyError(where, f"must be within 0..{MAX_CONTAINERS}, got {value!r}")
        out[str(queue)] = int(value)
    return out


def parse_baseline(raw: Mapping[str, Any]) -> dict[str, float]:
    """``{"root.a": 60, "root.b": 40}`` (percent of the parent, summing to 100) or empty."""
    if not isinstance(raw, Mapping):
        raise PolicyError("baseline", "must be an object mapping queue paths to percentages")
    out = {str(q): _number(v, f"baseline.{q}", low=0.0, high=100.0) for q, v in raw.items()}
    if out and abs(sum(out.values()) - 100.0) > 0.005:
        raise PolicyError("baseline", f"percentages sum to {sum(out.values()):g}, not 100")
    return out


def containers_for(queue: str, floors: Mapping[str, int]) -> int:
    """The container count of ``queue``: its own entry, else ``"*"``, else the default."""
    return floors.get(queue, floors.get(ANY_QUEUE, DEFAULT_CONTAINERS))


def _hundredths_for(need: float, available: float) -> int:
    """Smallest hundredths ``h`` with ``floor(available * h / 10000) >= need`` (see module)."""
    if need <= 0:
        return 0
    if available <= 0 or need > available:
        return TOTAL
    exact = Fraction(need).limit_denominator(10**6) * TOTAL / Fraction(available)
    h = math.ceil(exact)
    while h < TOTAL and not _rm_guarantees(h, need, available):
        h += 1  # the RM's float arithmetic lands just below: one more hundredth
    return min(TOTAL, h)


def _as_float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def rm_guaranteed(fraction: float, available: float) -> int:
    """What the RM guarantees of ``available`` to a queue at ``fraction`` of it: it keeps
    capacities as Java floats and rounds the guaranteed resources down (the smaller of the double
    and the float product, floored)."""
    return min(math.floor(fraction * available), math.floor(_as_float32(fraction) * available))


def _rm_guarantees(h: int, need: float, available: float) -> bool:
    """Whether ``h`` hundredths still hold ``need`` after the RM's rounding."""
    return rm_guaranteed(h / TOTAL, available) >= need


def amount_hundredths(amount: Amount, parent: Amount) -> int:
    """``amount`` as hundredths of ``parent``: the larger of its two resources (DRF's dominant
    share), rounded so the RM's rounded-down guarantee still holds it."""
    return max(
        _hundredths_for(math.ceil(amount.vcores - 1e-9), parent.vcores),
        _hundredths_for(amount.memory_mb, parent.memory_mb),
    )


@dataclass(frozen=True, slots=True)
class QueueFloor:
    """One queue's floor and what it is made of (hundredths of a percent of the parent)."""

    queue: str
    containers: int
    container_h: int
    operator_h: int
    admission_h: int
    floor_h: int
    reasons: tuple[str, ...] = ()
    amount: Amount = Amount(0, 0)  # the same floor in vcores and MB (absolute capacities)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (percent)."""
        return {
            "containers": self.containers,
            "container_floor": self.container_h / 100,
            "operator_min": self.operator_h / 100,
            "admission_floor": self.admission_h / 100,
            "floor": self.floor_h / 100,
            "floor_resources": self.amount.to_dict(),
            "reasons": list(self.reasons),
        }


@dataclass(frozen=True, slots=True)
class Floors:
    """The floors of the managed queues at one tick."""

    queues: Mapping[str, QueueFloor]
    unit: Amount
    unit_source: str
    parent: Amount
    scaled: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Queues whose container or admission floor could not be sized (parent resources unknown).
    unsized: tuple[str, ...] = ()

    def bounds(self, operator: Mapping[str, Bounds]) -> dict[str, Bounds]:
        """The operator's bounds with every minimum raised to its queue's floor."""
        out = dict(operator)
        for q, f in self.queues.items():
            b = operator.get(q, NO_BOUNDS)
            out[q] = Bounds(max(b.min_h, f.floor_h), b.max_h)
        return out

    def holds(self, capacities_h: Mapping[str, int]) -> bool:
        """True when no queue is below its floor."""
        return all(capacities_h.get(q, 0) >= f.floor_h for q, f in self.queues.items())

    def to_dict(self) -> dict[str, Any]:
        """JSON form for the decision record."""
        return {
            "min_allocation": self.unit.to_dict(),
            "min_allocation_source": self.unit_source,
            "parent_resources": self.parent.to_dict(),
            "scaled_to_fit": self.scaled,
            "notes": list(self.notes),
            "queues": {q: f.to_dict() for q, f in sorted(self.queues.items())},
        }


def compute(
    queues: Sequence[str],
    floors: Mapping[str, int],
    unit: Amount,
    unit_source: str,
    parent: Amount,
    operator: Mapping[str, Bounds],
    admission: Mapping[str, Amount] | None = None,
) -> Floors:
    """Every managed queue's floor (see the module docstring)."""
    admission = admission or {}
    known = parent.vcores > 0 and parent.memory_mb > 0
    notes: list[str] = []
    unsized = tuple(q for q in sorted(queues) if containers_for(q, floors) or admission.get(q))
    if known or not unsized:
        unsized = ()
    else:
        notes.append(
            "parent resources unknown (no running NodeManager): the floors of "
            f"{', '.join(unsized)} cannot be sized"
        )
    lines: dict[str, QueueFloor] = {}
    for q in sorted(queues):
        bound = operator.get(q, NO_BOUNDS)
        count = containers_for(q, floors)
        container_h = amount_hundredths(unit.times(count), parent) if known and count else 0
        reserved = admission.get(q)
        admission_h = amount_hundredths(reserved, parent) if known and reserved else 0
        floor_h = max(bound.min_h, container_h, admission_h)
        reasons = []
        if count and known:
            reasons.append(f"{count} container(s) of the minimum allocation: {container_h / 100}")
        if admission_h:
            reasons.append(f"admitted deadline grants: {admission_h / 100}")
        if floor_h > bound.max_h:
            reasons.append(f"cut to the operator's maximum {format_hundredths(bound.max_h)}")
            floor_h = bound.max_h
        need = unit.times(count) if known else Amount(0, 0)
        if reserved is not None:
            need = Amount(
                max(need.vcores, reserved.vcores), max(need.memory_mb, reserved.memory_mb)
            )
        lines[q] = QueueFloor(
            q, count, container_h, bound.min_h, admission_h, floor_h, tuple(reasons), need
        )
    total = sum(f.floor_h for f in lines.values())
    if total <= TOTAL:
        return Floors(lines, unit, unit_source, parent, False, tuple(notes), unsized)
    notes.append(
        f"floors sum to {format_hundredths(total)} > 100: the part above the operator's "
        "minimums is scaled down to fit"
    )
    return Floors(_scaled(lines), unit, unit_source, parent, True, tuple(notes), unsized)


def _scaled(lines: Mapping[str, QueueFloor]) -> dict[str, QueueFloor]:
    base = {q: f.operator_h for q, f in lines.items()}
    extra = {q: f.floor_h - base[q] for q, f in lines.items()}
    room = TOTAL - sum(base.values())  # >= 0: the config refuses minimums above 100
    total_extra = sum(extra.values())
    # the exact shares sum to ``room``, a whole number, so largest remainder keeps that sum
    share = round_preserving_sum({q: Fraction(extra[q] * room, total_extra) for q in lines})
    out = {}
    for q, f in lines.items():
        got = base[q] + share[q]
        note = f"scaled to {got / 100} to fit 100 %"
        out[q] = QueueFloor(
            q,
            f.containers,
            f.container_h,
            f.operator_h,
            f.admission_h,
            got,
            (*f.reasons, note),
            Amount(
                f.amount.vcores * got / max(1, f.floor_h),
                f.amount.memory_mb * got / max(1, f.floor_h),
            ),
        )
    return out


def lift_amounts(
    alloc: Mapping[str, Mapping[str, float]], floors: Floors, cluster: Mapping[str, float]
) -> dict[str, dict[str, float]]:
    """Absolute allocations (``{"vcores", "memory"}``) with every queue raised to its floor; the
    difference comes from the queues above their floor, in proportion to their excess. Left as
    they are when the floors do not fit the cluster."""
    keys = {"vcores": "vcores", "memory": "memory_mb"}
    out = {q: dict(v) for q, v in alloc.items()}
    for r, attr in keys.items():
        need = {q: float(getattr(f.amount, attr)) for q, f in floors.queues.items() if q in out}
        if sum(need.values()) > cluster.get(r, 0):
            continue
        short = {q: max(0.0, need[q] - out[q].get(r, 0.0)) for q in need}
        excess = {q: max(0.0, out[q].get(r, 0.0) - need.get(q, 0.0)) for q in out}
        missing, spare = sum(short.values()), sum(excess.values())
        if missing <= 0 or spare <= 0:
            continue
        take = min(1.0, missing / spare)
        for q in out:
            out[q][r] = out[q].get(r, 0.0) + short.get(q, 0.0) - excess[q] * take
    return out
