"""Shared control code as it was before the simulator's speed-ups (``capacity_hundredths`` of
``app/policies/rounding.py``, ``normalise`` of ``app/control/drift.py``, ``_lines_plan`` of
``app/control/plan.py``), kept verbatim as the reference that ``test_speed_identical.py``
compares the optimised code with on fixed inputs: the live controller runs the same functions,
so they must return exactly what they did."""

# ruff: noqa
# mypy: ignore-errors

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from fractions import Fraction

from app.control.budget import TOTAL, to_hundredths
from app.control.drift import QueueValues
from app.control.plan import Limits, Plan, _line, _Steps
from app.policies.base import PolicyError
from app.policies.rounding import TOTAL_HUNDREDTHS


def _finite(value: float, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PolicyError(where, f"must be a number, got {value!r}")
    if not math.isfinite(value):
        raise PolicyError(where, f"must be finite, got {value!r}")
    return float(value)


def _validate_shares(shares: Mapping[str, float]) -> dict[str, Fraction]:
    if not shares:
        raise PolicyError("shares", "at least one queue is needed")
    out: dict[str, Fraction] = {}
    for name, value in shares.items():
        num = _finite(value, f"shares.{name}")
        if num < 0:
            raise PolicyError(f"shares.{name}", f"must be >= 0, got {value!r}")
        out[name] = Fraction(num)
    if sum(out.values()) == 0:
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
        out[name] = math.ceil(Fraction(num) * 100)
    if sum(out.values()) > TOTAL_HUNDREDTHS:
        raise PolicyError("min_percent", "minimum percentages sum to more than 100")
    return out


def _pin_minimums(shares: Mapping[str, Fraction], mins: Mapping[str, int]) -> set[str]:
    """Queues whose proportional target falls below their minimum; they get exactly the minimum.

    Pinning a queue takes hundredths away from the others, which can push another queue below its
    minimum, so repeat until no new queue is pinned (at most one pass per queue).
    """
    pinned: set[str] = set()
    while True:
        free = [n for n in shares if n not in pinned]
        pool = TOTAL_HUNDREDTHS - sum(mins[n] for n in pinned)
        mass = sum(shares[n] for n in free)
        below = {n for n in free if mass == 0 or shares[n] / mass * pool < mins[n]}
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
    mass = sum(exact[n] for n in free)
    targets = {n: exact[n] / mass * pool for n in free} if free else {}
    for name, target in targets.items():
        out[name] = math.floor(target)
    left = pool - sum(out[n] for n in free)
    # Largest remainder first; equal remainders by name so ties never depend on dict order.
    order = sorted(free, key=lambda n: (-(targets[n] - math.floor(targets[n])), n))
    for name in order[:left]:
        out[name] += 1
    return {name: out[name] for name in exact}


def normalise(value: str | None) -> object:
    """A comparable form: hundredths for a percentage, a sorted tuple for absolute resources."""
    if value is None:
        return None
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        parts = (p.split("=", 1) for p in text[1:-1].split(",") if "=" in p)
        return tuple(sorted((k.strip(), v.strip()) for k, v in parts))
    try:
        number = float(text)
    except ValueError:
        return text
    return TOTAL if number == -1 else to_hundredths(number)


def _lines_plan(
    live: QueueValues,
    shares: Mapping[str, float],
    steps: _Steps,
    limits: Limits,
    reasons: Mapping[str, str],
    fraction: Fraction,
    why: str,
    push: bool,
) -> Plan:
    lines = {
        q: _line(q, live[q], shares.get(q, 0.0), steps, limits, reasons.get(q, ""))
        for q in sorted(live)
    }
    if not push:
        lines = {q: replace(line, planned=dict(line.live)) for q, line in lines.items()}
    plan = Plan(lines, push=push, reason=why, step_fraction=fraction)
    if push and not plan.changes():
        return Plan(lines, push=False, reason="no change", step_fraction=fraction)
    return plan
