"""Desired shares vs the RM's live configuration -> a bounded plan of changes (``docs/style.md``,
"Habits" 3: desired, diff, act).

``percent_plan`` turns shares into capacities that sum to exactly 100.00
(``app.policies.rounding``, largest remainder, never below a minimum bound), projects them into
the operator's bounds, applies the minimum change worth pushing and the step limit
(``app.control.budget``), and keeps every queue's ``maximum-capacity`` at least its capacity.
``absolute_plan`` does the same diff for RRF's absolute ``[memory=..,vcores=..]`` capacities.
Each queue line keeps every intermediate number and a reason, so the audit trail shows how the
pushed value was reached.

Decisions where the issue is silent:

* ``maximum-capacity`` stays what the operator configured (queues keep borrowing, as Fawkes'
  inactive queues must), raised only when the new capacity would exceed it (the RM refuses
  capacity > maximum-capacity).
* The interference guard's ``maximum-capacity`` targets (percentage plans only: RRF's absolute
  queues borrow up to the whole cluster) replace the live value, but never go below the planned
  capacity.
* When the live capacities are outside the bounds (a queue below its floor), they are first
  projected into them in full, however small that move (the minimum change does not apply), and
  the step limit applies from there. RRF's absolute path likewise skips the minimum change when
  it lifts a live queue to its floor.
* When the floors cannot be sized (no running NodeManager, so the cluster's size is unknown),
  nothing is pushed: planning without them could drive a queue below the floor it had one poll
  earlier.
* When the live capacities do not sum to exactly 100.00 (e.g. three queues at 33.33 after a hand
  edit) the step limit is waived: a fraction of the way between a non-100 and a 100 vector does
  not sum to 100.
* RRF plans are absolute resources: the step limit and the minimum change are fractions of the
  cluster's vcores and MB (a percentage of the parent is a fraction of the cluster only under
  root, so percentage bounds are refused with RRF, see ``config``); their ``maximum-capacity``
  is the whole cluster, so queues can still borrow. A live percentage counts as that fraction of
  the cluster, so the switch from percentages is step-limited too (and always pushed: the
  siblings must all change mode in one PUT). Amounts that are not finite or are negative are
  refused (``PolicyError``, as the percentage path refuses such shares); amounts summing to more
  than the cluster are scaled down to it, since no queue can be guaranteed more.
* The way back, absolute live capacities under a percentage policy, counts each as its dominant
  share of the cluster (of the siblings' sum when the totals are unknown), so the step limit
  holds from what the queues guarantee now; every such line is sent as a percentage (an absolute
  ``maximum-capacity`` becomes 100), as the RM refuses siblings in mixed modes.
* A line is left out of the PUT only when the RM would read each planned value as exactly the
  live one (``50`` for ``50.00``, but not ``33.333`` for ``33.33``), so the siblings it ends up
  holding sum to exactly 100.00.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from app.control.budget import (
    NO_BOUNDS,
    TOTAL,
    Bounds,
    check_feasible,
    format_hundredths,
    largest_change,
    limit_step,
    project_to_bounds,
    round_preserving_sum,
    within_bounds,
)
from app.control.drift import QueueValues, normalise
from app.control.floors import Floors, lift_amounts
from app.domain.outcome import PolicyOutcome
from app.policies.base import finite_number
from app.policies.rounding import absolute_capacities, capacity_hundredths

CAPACITY = "capacity"
MAX_CAPACITY = "maximum-capacity"
RESOURCES = ("vcores", "memory")


# Parsing a decimal into a Fraction was a tenth of a plan's time; the values are the two-decimal
# strings the plan itself formats (10,001 of them), and a Fraction is immutable, so each is parsed
# once.
@lru_cache(maxsize=16384)
def _exact_percent(value: str | None) -> Fraction | None:
    """A percentage string as the exact number it denotes (``-1``: 100), else None."""
    try:
        number = Fraction((value or "").strip())
    except ValueError:
        return None
    return Fraction(100) if number == -1 else number


def _exactly_same(planned: str, live: str | None) -> bool:
    exact = _exact_percent(planned), _exact_percent(live)
    if exact[0] is not None or exact[1] is not None:
        return exact[0] == exact[1]
    return normalise(planned) == normalise(live)


@dataclass(frozen=True, slots=True)
class QueueLine:
    """One queue: live and planned values, the numbers in between, and why."""

    queue: str
    live: Mapping[str, str]
    planned: Mapping[str, str]
    numbers: Mapping[str, Any] = field(default_factory=dict)
    reasons: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        """True when the RM would read some planned value differently from the live one, exactly:
        ``33.333`` is not ``33.33`` (left out, the siblings would sum to 100.003), and an absolute
        ``[memory=0,vcores=0]`` is not ``0.00`` (left out, the siblings would mix modes)."""
        return any(not _exactly_same(v, self.live.get(k)) for k, v in self.planned.items())

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "live": dict(self.live),
            "planned": dict(self.planned),
            **dict(self.numbers),
            "changed": self.changed,
            "reasons": list(self.reasons),
        }


@dataclass(frozen=True, slots=True)
class Plan:
    """The planned configuration of the managed parent's children and whether to push it."""

    lines: Mapping[str, QueueLine]
    push: bool
    reason: str
    step_fraction: Fraction = Fraction(1)

    def changes(self) -> dict[str, dict[str, str]]:
        """What to send: the planned values of the changed queues only."""
        return {q: dict(line.planned) for q, line in self.lines.items() if line.changed}

    def previous(self) -> dict[str, dict[str, str]]:
        """The live values of the changed queues (what a restore sends back)."""
        return {q: dict(line.live) for q, line in self.lines.items() if line.changed}

    def expected(self) -> dict[str, dict[str, str]]:
        """Every managed queue's values once the plan is applied."""
        return {q: dict(line.planned) for q, line in self.lines.items()}

    def to_dict(self) -> dict[str, Any]:
        """JSON form for the audit trail."""
        return {
            "push": self.push,
            "reason": self.reason,
            "step_fraction": str(self.step_fraction),
            "step_fraction_value": float(self.step_fraction),
            "queues": {q: line.to_dict() for q, line in sorted(self.lines.items())},
            "changes": self.changes() if self.push else {},
        }


def unchanged(live: QueueValues, reason: str) -> Plan:
    """A plan that keeps the live configuration."""
    lines = {q: QueueLine(q, dict(v), dict(v), reasons=(reason,)) for q, v in live.items()}
    return Plan(lines, push=False, reason=reason)


def live_percentages(live: QueueValues) -> tuple[dict[str, int], dict[str, int]]:
    """Live ``capacity`` and ``maximum-capacity`` in hundredths of a percent (absolute or
    missing values: 0 and 100)."""
    return _live_hundredths(live, CAPACITY, 0), _live_hundredths(live, MAX_CAPACITY, TOTAL)


def _live_hundredths(live: QueueValues, key: str, default: int) -> dict[str, int]:
    out = {}
    for queue, values in live.items():
        value = normalise(values.get(key))
        out[queue] = value if isinstance(value, int) else default
    return out


def _amounts(value: str | None) -> dict[str, Fraction] | None:
    """An absolute ``[memory=..,vcores=..]`` capacity as amounts; None for anything else."""
    norm = normalise(value)
    if not isinstance(norm, tuple):
        return None
    out: dict[str, Fraction] = {}
    for key, amount in norm:
        try:
            out[key] = Fraction(amount)
        except ValueError:
            continue
    return out


def _live_capacities(live: QueueValues, cluster: Mapping[str, float] | None) -> dict[str, int]:
    """Live capacities in hundredths of a percent of the parent. An absolute value (left by RRF)
    counts as its dominant share of the cluster totals (of the siblings' sum when the totals are
    unknown), so a switch back to percentages is step-limited from what the queues hold now
    rather than from 0."""
    amounts = {q: _amounts(v.get(CAPACITY)) for q, v in live.items()}
    if all(a is None for a in amounts.values()):
        return _live_hundredths(live, CAPACITY, 0)
    totals = {r: Fraction((cluster or {}).get(r, 0)) for r in RESOURCES}
    for r in RESOURCES:
        if totals[r] <= 0:
            totals[r] = sum((a.get(r, Fraction(0)) for a in amounts.values() if a), Fraction(0))
    plain = _live_hundredths(live, CAPACITY, 0)
    exact: dict[str, Fraction] = {}
    for q, a in amounts.items():
        if a is None:
            exact[q] = Fraction(plain[q])
            continue
        shares = [a.get(r, Fraction(0)) / totals[r] for r in RESOURCES if totals[r] > 0]
        exact[q] = max(shares, default=Fraction(0)) * TOTAL
    return round_preserving_sum(exact)


@dataclass(frozen=True, slots=True)
class Limits:
    """The budgets of one push, in hundredths of a percent."""

    bounds: Mapping[str, Bounds] = field(default_factory=dict)
    max_step_h: int = 1000
    min_change_h: int = 100
    # maximum-capacity = capacity (the policy's queues may not borrow, ``PolicyOutcome``)
    no_borrowing: bool = False
    # maximum-capacity the interference guard asks for (``app.control.guard``), never below the
    # planned capacity; queues not named keep theirs.
    max_targets: Mapping[str, int] = field(default_factory=dict)


def _target(
    shares: Mapping[str, float], queues: list[str], bounds: Mapping[str, Bounds]
) -> dict[str, int]:
    # ``rounding`` rounds a minimum percent up to hundredths; passing min_h - 0.5 hundredths makes
    # that land exactly on min_h whatever the float error of the division (99.99 is not exact).
    mins = {q: (bounds[q].min_h - 0.5) / 100 for q in queues if q in bounds and bounds[q].min_h > 0}
    return capacity_hundredths({q: shares.get(q, 0.0) for q in queues}, mins)


def _step(
    live: dict[str, int], bounded: dict[str, int], limits: Limits
) -> tuple[dict[str, int], Fraction, str]:
    if sum(live.values()) != TOTAL:
        total = format_hundredths(sum(live.values()))
        return bounded, Fraction(1), f"live capacities sum to {total}, not 100: step limit waived"
    start = live
    moved_in = ""
    if not within_bounds(live, limits.bounds):
        # Bounds (and the floors among them) are the harder promise: the live values move into
        # them at once, and only the rest of the way is step-limited.
        start, _ = project_to_bounds(live, limits.bounds)
        moved_in = "live capacities outside the bounds: moved into them first; "
    planned, fraction = limit_step(start, bounded, limits.max_step_h)
    if moved_in and fraction >= 1:
        return planned, fraction, moved_in.removesuffix("; ")
    if fraction < 1:
        step = format_hundredths(limits.max_step_h)
        return (
            planned,
            fraction,
            f"{moved_in}moved {float(fraction):.4f} of the way (max step {step} pp)",
        )
    return planned, fraction, ""


@dataclass(frozen=True, slots=True)
class _Steps:
    """The intermediate vectors of a percent plan, in hundredths."""

    target: Mapping[str, int]
    bounded: Mapping[str, int]
    planned: Mapping[str, int]
    live_cap: Mapping[str, int]
    live_max: Mapping[str, int]


def percent_plan(
    shares: Mapping[str, float],
    live: QueueValues,
    limits: Limits,
    cluster: Mapping[str, float] | None = None,
) -> Plan:
    """Capacities for the live queues from ``shares``, bounded, hysteresis, step-limited.
    ``cluster`` (``{"vcores": n, "memory": MB}``) converts live absolute capacities."""
    queues = sorted(live)
    if not queues:
        return unchanged(live, "no queue under the managed parent")
    if not any(shares.get(q, 0.0) > 0 for q in queues):
        return unchanged(live, "the policy gave every managed queue a share of 0")
    check_feasible(limits.bounds, queues)
    live_cap = _live_capacities(live, cluster)
    live_max = _live_hundredths(live, MAX_CAPACITY, TOTAL)
    target = _target(shares, queues, limits.bounds)
    bounded, bound_reasons = project_to_bounds(target, limits.bounds)
    change = largest_change(live_cap, bounded)
    # The minimum change keeps small moves from churning the queues; it never keeps a live queue
    # outside its bounds (below its floor), which ``_step`` moves into them at once.
    if change < max(limits.min_change_h, 1) and within_bounds(live_cap, limits.bounds):
        size, floor = format_hundredths(change), format_hundredths(limits.min_change_h)
        why = "no change" if change == 0 else f"largest change {size} pp < minimum {floor} pp"
        steps = _Steps(target, bounded, live_cap, live_cap, live_max)
        # capacities stay; a no-borrowing policy still lowers maximum-capacity to them, and the
        # interference guard still moves the batch queues' maximum-capacity
        fix_max = limits.no_borrowing and any(live_max[q] != live_cap[q] for q in queues)
        why = f"{why}; maximum-capacity set to capacity" if fix_max else why
        guard = not limits.no_borrowing and any(
            q in limits.max_targets and max(live_cap[q], limits.max_targets[q]) != live_max[q]
            for q in queues
        )
        why = f"{why}; maximum-capacity moved by the interference guard" if guard else why
        fix_max = fix_max or guard
        return _lines_plan(live, shares, steps, limits, bound_reasons, Fraction(0), why, fix_max)
    planned, fraction, step_note = _step(live_cap, bounded, limits)
    reasons = {q: "; ".join(r for r in (bound_reasons.get(q, ""), step_note) if r) for q in queues}
    steps = _Steps(target, bounded, planned, live_cap, live_max)
    why = step_note or "target within the step limit"
    return _lines_plan(live, shares, steps, limits, reasons, fraction, why, True)


def _line(
    q: str,
    live: Mapping[str, str],
    share: float,
    steps: _Steps,
    limits: Limits,
    reason: str,
) -> QueueLine:
    planned, live_cap, live_max = steps.planned[q], steps.live_cap[q], steps.live_max[q]
    bounds = limits.bounds.get(q, NO_BOUNDS)
    new_max = planned if limits.no_borrowing else max(live_max, planned)
    guarded = not limits.no_borrowing and q in limits.max_targets
    if guarded:
        new_max = max(planned, limits.max_targets[q])
    notes = [f"share {share:.6f} -> target {format_hundredths(steps.target[q])}"]
    if reason:
        notes.append(reason)
    if new_max != live_max:
        why = "= capacity: no borrowing" if limits.no_borrowing else "(>= capacity)"
        why = "(interference guard)" if guarded else why
        notes.append(f"maximum-capacity {format_hundredths(new_max)} {why}")
    values = {CAPACITY: format_hundredths(planned), MAX_CAPACITY: format_hundredths(new_max)}
    numbers = {
        "share": share,
        "live_h": live_cap,
        "target_h": steps.target[q],
        "bounded_h": steps.bounded[q],
        "planned_h": planned,
        "planned_max_h": new_max,
        "bounds": {"min": bounds.min_h / 100, "max": bounds.max_h / 100},
    }
    return QueueLine(q, dict(live), values, numbers, tuple(notes))


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
        # ``dataclasses.replace(line, planned=...)`` spelt out: it was 8 % of a plan that is kept
        lines = {
            q: QueueLine(line.queue, line.live, dict(line.live), line.numbers, line.reasons)
            for q, line in lines.items()
        }
    plan = Plan(lines, push=push, reason=why, step_fraction=fraction)
    if push and not plan.changes():
        return Plan(lines, push=False, reason="no change", step_fraction=fraction)
    return plan


def _live_amounts(value: str | None, cluster: Mapping[str, float]) -> dict[str, float]:
    """A live ``capacity`` as absolute amounts: ``[memory=..,vcores=..]`` as written, a
    percentage of root's child as that fraction of the cluster (what it guarantees now)."""
    norm = normalise(value)
    if isinstance(norm, tuple):
        parsed = dict(norm)
        return {r: float(parsed.get(r, 0)) for r in RESOURCES}
    fraction = norm / TOTAL if isinstance(norm, int) else 0.0
    return {r: fraction * cluster[r] for r in RESOURCES}


def _checked_amounts(alloc: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Absolute amounts per queue; ``PolicyError`` naming ``amounts.<queue>.<resource>`` for a
    value that is not a finite number >= 0."""
    return {
        q: {r: finite_number(a.get(r, 0.0), f"amounts.{q}.{r}", low=0) for r in RESOURCES}
        for q, a in alloc.items()
    }


def absolute_plan(
    alloc: Mapping[str, Mapping[str, float]],
    live: QueueValues,
    cluster: Mapping[str, float],
    max_step: float,
    min_change: float,
    minimums: Mapping[str, Mapping[str, float]] | None = None,
) -> Plan:
    """RRF's absolute capacities for the live queues, step-limited; ``maximum-capacity`` = the
    whole cluster so queues still borrow.

    ``alloc``, ``cluster`` and ``minimums`` (the queues' floors) are ``{"vcores": n, "memory":
    MB}``; ``max_step`` and ``min_change`` are fractions of the cluster per resource. Every queue
    moves the same fraction of its way (as ``budget.limit_step``); whole vcores and MB by largest
    remainder (``rounding.absolute_capacities``), so a step can exceed the limit by that one unit.
    """
    checked = _checked_amounts(alloc)
    queues = sorted(live)
    if not queues or any(cluster[r] <= 0 for r in RESOURCES):
        return unchanged(live, "no queue under the managed parent, or an empty cluster")
    now = {q: _live_amounts(live[q].get(CAPACITY), cluster) for q in queues}
    want = {q: {r: checked.get(q, {}).get(r, 0.0) for r in RESOURCES} for q in queues}
    why = "moved {fraction:.4f} of the way to RRF's allocation"
    for r in RESOURCES:
        wanted = sum(want[q][r] for q in queues)
        if wanted > cluster[r]:
            for q in queues:
                want[q][r] *= cluster[r] / wanted
            why += f"; allocations scaled to the cluster's {r}"
    moves = [abs(want[q][r] - now[q][r]) / cluster[r] for q in queues for r in RESOURCES]
    biggest = max(moves, default=0.0)
    fraction = 1.0 if biggest <= max_step else max_step / biggest
    exact = {
        q: {r: now[q][r] + fraction * (want[q][r] - now[q][r]) for r in RESOURCES} for q in queues
    }
    strings = absolute_capacities({q: (e["vcores"], e["memory"]) for q, e in exact.items()})
    top = f"[memory={int(cluster['memory'])},vcores={int(cluster['vcores'])}]"
    lines = {
        q: QueueLine(
            q,
            dict(live[q]),
            {CAPACITY: strings[q], MAX_CAPACITY: top},
            {"live": now[q], "target": want[q], "planned": exact[q]},
            (why.format(fraction=fraction),),
        )
        for q in queues
    }
    switching = any(not isinstance(normalise(v.get(CAPACITY)), tuple) for v in live.values())
    floors = minimums or {}
    lifting = any(
        now[q][r] < floors[q].get(r, 0.0) - 1e-9 and want[q][r] > now[q][r]
        for q in queues
        if q in floors
        for r in RESOURCES
    )
    if biggest < min_change and not switching and not lifting:
        reason = f"largest move {biggest:.4f} of the cluster < minimum change {min_change:.4f}"
        return unchanged(live, reason)
    plan = Plan(lines, push=True, reason=f"absolute capacities, {fraction:.4f} of the way")
    if not plan.changes():
        return unchanged(live, "no change")
    return Plan(lines, True, plan.reason, Fraction(fraction).limit_denominator(10**6))


def plan_outcome(
    outcome: PolicyOutcome,
    live: QueueValues,
    *,
    bounds: Mapping[str, Bounds],
    max_step_pp: float,
    min_change_pp: float,
    total: Mapping[str, float],
    floors: Floors | None = None,
    max_targets: Mapping[str, int] | None = None,
) -> Plan:
    """The plan step of one tick, shared by the live controller and the simulator: a policy's
    shares (or RRF's absolute amounts) against the live queue values, within the operator's bounds
    raised to the queues' minimum shares (``floors``), the step limit and the minimum change.
    ``total`` is ``{"vcores": n, "memory": MB}``."""
    if floors is not None and floors.unsized:
        return unchanged(
            live,
            "cluster size unknown (no running NodeManager): the floors of "
            f"{', '.join(floors.unsized)} cannot be sized, so nothing is pushed",
        )
    if outcome.amounts is not None:
        amounts = _checked_amounts(outcome.amounts)
        minimums = None
        if floors is not None:
            amounts = lift_amounts(amounts, floors, total)
            minimums = {
                q: {"vcores": f.amount.vcores, "memory": f.amount.memory_mb}
                for q, f in floors.queues.items()
            }
        return absolute_plan(amounts, live, total, max_step_pp / 100, min_change_pp / 100, minimums)
    if outcome.shares is None:
        return unchanged(live, outcome.note or "the policy decided no shares")
    limits = Limits(
        bounds=bounds if floors is None else floors.bounds(bounds),
        max_step_h=round(max_step_pp * 100),
        min_change_h=round(min_change_pp * 100) if outcome.min_change_applies else 0,
        no_borrowing=outcome.no_borrowing,
        max_targets=dict(max_targets or {}),
    )
    return percent_plan(outcome.shares, live, limits, total)
