"""Safety budgets on a capacity plan (``docs/style.md``, "Habits" 3: the diff
enforces budgets): operator bounds, the maximum change per push and the minimum change worth
pushing.

All arithmetic is on integer hundredths of a percent (10000 = 100.00 %, as
``app.policies.rounding``) with exact rationals, so every result sums to exactly 10000 and a
bound or a step limit is never missed by a rounding error.

Decisions where the issue is silent:

* Bounds are projected, not merely clamped: a queue pushed to its bound gives (or takes) the
  difference to (from) the queues still inside their bounds, in proportion to their targets
  (equally when those are all 0), so the sum stays 100.00.
* The step limit moves every queue by the same fraction ``f`` of its way from the live value to
  the target, ``f = min(1, max_step / max_i |target_i - live_i|)``. The exact values sum to 100
  because both endpoints do; largest-remainder rounding keeps each rounded value between the
  floor and ceiling of its exact value, hence between its live value and its target (both whole
  hundredths). So a plan whose endpoints respect the bounds respects them too (bounds are a box,
  which is convex), and no queue moves by more than ``max_step``.
* When the live configuration is itself outside the operator's bounds, bounds are the harder
  promise: ``app.control.plan`` projects the live values into them at once and step-limits only
  the rest of the way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from app.policies.base import PolicyError

TOTAL = 10000
"""100.00 percent in hundredths."""


@dataclass(frozen=True, slots=True)
class Bounds:
    """An operator's capacity range for one queue, in hundredths of a percent of the parent."""

    min_h: int = 0
    max_h: int = TOTAL

    def clamp(self, value: int) -> int:
        """``value`` moved into ``[min_h, max_h]``."""
        return max(self.min_h, min(self.max_h, value))

    def holds(self, value: int) -> bool:
        """True when ``value`` is within the range."""
        return self.min_h <= value <= self.max_h


NO_BOUNDS = Bounds()


def to_hundredths(percent: float) -> int:
    """A percentage as whole hundredths (nearest; the RM reports floats like 33.329998)."""
    return round(percent * 100)


def format_hundredths(value: int) -> str:
    """``3333`` -> ``"33.33"``: exactly what is sent to the RM."""
    return f"{value // 100}.{value % 100:02d}"


def _percent(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PolicyError(where, f"must be a number of percent, got {value!r}")
    if not 0 <= value <= 100:
        raise PolicyError(where, f"must be within 0..100, got {value!r}")
    return float(value)


def parse_bounds(raw: Mapping[str, object], prefix: str = "bounds") -> dict[str, Bounds]:
    """``{"root.a": {"min": 10, "max": 60}}`` (percent) -> bounds; errors name the field.

    A minimum is rounded up and a maximum down to hundredths so the result never exceeds what the
    operator wrote.
    """
    out: dict[str, Bounds] = {}
    for queue, entry in raw.items():
        where = f"{prefix}.{queue}"
        if not isinstance(entry, Mapping):
            raise PolicyError(where, 'must be an object like {"min": 10, "max": 60}')
        unknown = set(entry) - {"min", "max"}
        if unknown:
            raise PolicyError(f"{where}.{sorted(unknown)[0]}", "unknown key (use min and max)")
        low = _percent(entry.get("min", 0), f"{where}.min")
        high = _percent(entry.get("max", 100), f"{where}.max")
        if low > high:
            raise PolicyError(f"{where}.min", f"is above max ({low} > {high})")
        out[queue] = Bounds(math.ceil(low * 100 - 1e-9), math.floor(high * 100 + 1e-9))
    return out


def bounds_to_json(bounds: Mapping[str, Bounds]) -> dict[str, dict[str, float]]:
    """Inverse of ``parse_bounds`` (percent)."""
    return {q: {"min": b.min_h / 100, "max": b.max_h / 100} for q, b in sorted(bounds.items())}


def check_feasible(bounds: Mapping[str, Bounds], queues: list[str], where: str = "bounds") -> None:
    """Raise ``PolicyError`` unless some capacities within the bounds sum to exactly 100."""
    lows = sum(bounds.get(q, NO_BOUNDS).min_h for q in queues)
    highs = sum(bounds.get(q, NO_BOUNDS).max_h for q in queues)
    if lows > TOTAL:
        raise PolicyError(where, f"minimums sum to {format_hundredths(lows)}, more than 100")
    if highs < TOTAL:
        raise PolicyError(where, f"maximums sum to {format_hundredths(highs)}, less than 100")


def round_preserving_sum(exact: Mapping[str, Fraction]) -> dict[str, int]:
    """Largest-remainder rounding of values whose sum is a whole number; ties by name."""
    out = {q: math.floor(v) for q, v in exact.items()}
    left = int(sum(exact.values())) - sum(out.values())
    order = sorted(exact, key=lambda q: (-(exact[q] - out[q]), q))
    for queue in order[:left]:
        out[queue] += 1
    return out


def project_to_bounds(
    target: Mapping[str, int], bounds: Mapping[str, Bounds]
) -> tuple[dict[str, int], dict[str, str]]:
    """The target moved into the bounds with the sum kept at 10000; and why each queue moved.

    ``target`` must sum to 10000 and the bounds must be feasible (``check_feasible``).
    """
    clamped = {q: bounds.get(q, NO_BOUNDS).clamp(v) for q, v in target.items()}
    reasons = {
        q: f"clamped to bound {format_hundredths(clamped[q])}"
        for q in target
        if clamped[q] != target[q]
    }
    diff = TOTAL - sum(clamped.values())
    if diff == 0:
        return clamped, reasons
    free = [q for q in target if q not in reasons]
    mass = {q: Fraction(target[q]) for q in target}
    sign = 1 if diff > 0 else -1
    # Room in the direction of travel; clamped queues have none (they sit on a bound).
    room = {
        q: (
            0
            if q not in free
            else (bounds.get(q, NO_BOUNDS).max_h - clamped[q])
            if sign > 0
            else (clamped[q] - bounds.get(q, NO_BOUNDS).min_h)
        )
        for q in target
    }
    if sum(room.values()) < abs(diff):
        # The free queues cannot absorb it: queues sitting on one bound may still move toward
        # their other bound (feasibility guarantees the room exists).
        room = {
            q: (bounds.get(q, NO_BOUNDS).max_h - clamped[q])
            if sign > 0
            else (clamped[q] - bounds.get(q, NO_BOUNDS).min_h)
            for q in target
        }
    moved = _move(clamped, abs(diff), room, mass, sign)
    for queue in target:
        if moved[queue] != clamped[queue] and queue not in reasons:
            reasons[queue] = (
                f"{'raised' if sign > 0 else 'lowered'} to {format_hundredths(moved[queue])} "
                "to keep the sum at 100 after other queues hit a bound"
            )
    return moved, reasons


def _move(
    start: Mapping[str, int],
    amount: int,
    room: Mapping[str, int],
    mass: Mapping[str, Fraction],
    sign: int,
) -> dict[str, int]:
    """Shift ``amount`` hundredths in direction ``sign`` over queues with room, by ``mass``."""
    out = dict(start)
    left = dict(room)
    while amount > 0:
        open_ = sorted(q for q in out if left[q] > 0)
        if not open_:
            raise PolicyError("bounds", "no capacity plan fits the bounds")
        weights = {q: mass[q] for q in open_}
        total = sum(weights.values())
        if total == 0:
            weights = {q: Fraction(1) for q in open_}
            total = Fraction(len(open_))
        share = round_preserving_sum({q: Fraction(amount) * w / total for q, w in weights.items()})
        moved = 0
        for queue in open_:
            step = min(share[queue], left[queue])
            out[queue] += sign * step
            left[queue] -= step
            moved += step
        # ``share`` sums to ``amount`` over queues with room, so every round moves something.
        amount -= moved
    return out


def within_bounds(values: Mapping[str, int], bounds: Mapping[str, Bounds]) -> bool:
    """True when every queue's value holds its bounds."""
    return all(bounds.get(q, NO_BOUNDS).holds(v) for q, v in values.items())


def limit_step(
    live: Mapping[str, int], target: Mapping[str, int], max_step: int
) -> tuple[dict[str, int], Fraction]:
    """Move every queue the same fraction of the way to ``target`` so none moves by more than
    ``max_step``; returns the plan and the fraction (1 when the target is within the step).

    ``live`` and ``target`` both sum to 10000 over the same queues.
    """
    biggest = max((abs(target[q] - live[q]) for q in target), default=0)
    if biggest <= max_step:
        return dict(target), Fraction(1)
    fraction = Fraction(max_step, biggest)
    exact = {q: live[q] + fraction * (target[q] - live[q]) for q in target}
    return round_preserving_sum(exact), fraction


def largest_change(live: Mapping[str, int], planned: Mapping[str, int]) -> int:
    """The largest absolute change of any queue, in hundredths."""
    return max((abs(planned[q] - live.get(q, 0)) for q in planned), default=0)
