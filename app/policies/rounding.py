"""Shares -> YARN capacity percentages (``docs/policies.md``, "Common terms": *share*).

YARN's CapacityScheduler rejects a configuration whose sibling capacities do not sum to 100
(``docs/yarn.md`` section 1, "Illegal capacity sum"), and it takes percentages with two decimals.
This module turns the fractions a policy decides into such percentages:

* the shares are proportions: they are divided by their own sum first, so a decision whose shares
  sum to 0.999999999 (floating point) or to less than 1 (Fawkes ``None``) still maps onto 100.00;
* a queue never goes below its minimum percentage; a minimum is first rounded *up* to hundredths,
  so the two-decimal result can never undercut it;
* what is left after the minimums is split by largest-remainder (Hamilton) rounding on hundredths.
  Equal remainders go to the queue whose name sorts first: the result never depends on dict order.

All arithmetic is exact on integer hundredths, so the sum is exactly 10000 hundredths: a float is
an integer over a power of two, so the shares are compared and divided as integers over one common
denominator (the rationals ``fractions.Fraction`` would give, without its cost on every tick).
``capacity_percentages`` returns ``h / 100`` as floats for JSON and display; code that must add
percentages exactly should use ``capacity_hundredths``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from app.policies.base import PolicyError

TOTAL_HUNDREDTHS = 10000
"""100.00 percent in hundredths."""


def _finite(value: float, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PolicyError(where, f"must be a number, got {value!r}")
    if not math.isfinite(value):
        raise PolicyError(where, f"must be finite, got {value!r}")
    return float(value)


def _validate_shares(shares: Mapping[str, float]) -> dict[str, int]:
    """The shares as integer numerators over one common denominator (their largest power-of-two
    denominator), which keeps every ratio between them exact."""
    if not shares:
        raise PolicyError("shares", "at least one queue is needed")
    ratios: dict[str, tuple[int, int]] = {}
    for name, value in shares.items():
        num = _finite(value, f"shares.{name}")
        if num < 0:
            raise PolicyError(f"shares.{name}", f"must be >= 0, got {value!r}")
        ratios[name] = num.as_integer_ratio()
    denominator = max(q for _, q in ratios.values())
    out = {name: p * (denominator // q) for name, (p, q) in ratios.items()}
    if not any(out.values()):
        raise PolicyError("shares", "at least one share must be positive")
    return out


def _validate_minimums(
    min_percent: Mapping[str, float], names: Mapping[str, object]
) -> dict[str, int]:
    out = {name: 0 for name in names}
    for name, value in min_percent.items():
        where = f"min_percent.{name}"
        if name not in names:
            raise PolicyError(where, "names a queue that has no share")
        num = _finite(value, where)
        if not 0 <= num <= 100:
            raise PolicyError(where, f"must be within 0..100, got {value!r}")
        # Round up so the two-decimal capacity is never below the configured minimum.
        p, q = num.as_integer_ratio()
        out[name] = -(-100 * p // q)
    if sum(out.values()) > TOTAL_HUNDREDTHS:
        raise PolicyError("min_percent", "minimum percentages sum to more than 100")
    return out


def _pin_minimums(shares: Mapping[str, int], mins: Mapping[str, int]) -> set[str]:
    """Queues whose proportional target falls below their minimum; they get exactly the minimum.

    Pinning a queue takes hundredths away from the others, which can push another queue below its
    minimum, so repeat until no new queue is pinned (at most one pass per queue).
    """
    pinned: set[str] = set()
    while True:
        free = [n for n in shares if n not in pinned]
        pool = TOTAL_HUNDREDTHS - sum(mins[n] for n in pinned)
        mass = sum(shares[n] for n in free)
        # share / mass * pool < min, multiplied out by mass > 0
        below = {n for n in free if mass == 0 or shares[n] * pool < mins[n] * mass}
        if not below:
            return pinned
        pinned |= below


def capacity_hundredths(
    shares: Mapping[str, float], min_percent: Mapping[str, float] | None = None
) -> dict[str, int]:
    """Capacities in integer hundredths of a percent, summing to exactly 10000.

    ``shares`` are non-negative proportions (not all 0); ``min_percent`` maps a queue to its
    minimum capacity in percent (0..100, summing to at most 100). Invalid input raises
    ``PolicyError`` naming the field, e.g. ``shares.root.a`` or ``min_percent``.
    """
    exact = _validate_shares(shares)
    mins = _validate_minimums(min_percent or {}, exact)
    pinned = _pin_minimums(exact, mins)
    out = {name: mins[name] for name in pinned}
    free = [n for n in exact if n not in pinned]
    pool = TOTAL_HUNDREDTHS - sum(out.values())
    mass = sum(exact[n] for n in free)  # > 0 when any queue is free: a zero mass pins them all
    # Each target is exact[n] / mass * pool: its floor and the remainder of that division order
    # the queues as the target's fractional part would.
    remainder: dict[str, int] = {}
    for name in free:
        out[name], remainder[name] = divmod(exact[name] * pool, mass)
    left = pool - sum(out[n] for n in free)
    # Largest remainder first; equal remainders by name so ties never depend on dict order.
    order = sorted(free, key=lambda n: (-remainder[n], n))
    for name in order[:left]:
        out[name] += 1
    return {name: out[name] for name in exact}


def capacity_percentages(
    shares: Mapping[str, float], min_percent: Mapping[str, float] | None = None
) -> dict[str, float]:
    """Capacities in percent with two decimals (``capacity_hundredths`` divided by 100)."""
    return {name: h / 100 for name, h in capacity_hundredths(shares, min_percent).items()}


def _largest_remainder(values: Mapping[str, float]) -> dict[str, int]:
    target = math.floor(sum(values.values()) + 1e-9)
    floors = {n: math.floor(v + 1e-9) for n, v in values.items()}
    order = sorted(values, key=lambda n: (-(values[n] - floors[n]), n))
    for name in order[: max(target - sum(floors.values()), 0)]:
        floors[name] += 1
    return floors


def absolute_capacities(amounts: Mapping[str, tuple[float, float]]) -> dict[str, str]:
    """CapacityScheduler absolute resources ``[memory=MB,vcores=N]`` from ``(vcores, MB)`` per
    queue: whole vcores and MB, each resource by largest remainder so the queues' total is the
    floor of the exact total (ties to the name that sorts first)."""
    memory = _largest_remainder({n: mb for n, (_, mb) in amounts.items()})
    vcores = _largest_remainder({n: v for n, (v, _) in amounts.items()})
    return {n: f"[memory={memory[n]},vcores={vcores[n]}]" for n in amounts}
