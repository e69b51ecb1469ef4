"""The LTRF ledger from *measured* usage (``docs/policies.md``, "Long-Term Resource Fairness": "The
live controller integrates measured usage from the RM, not planned allocations"; seed 002,
section 9.4).

Used vcores per queue are integrated over time with the rectangle rule between consecutive polls:
the value seen at poll ``k`` holds until poll ``k + 1``. Each rectangle calls
``app.policies.ltrf.account_usage`` with that poll's entitlements ``e_i = w_i / sum w * R``
(``ltrf.entitlements``), so counted usage, debt and totals are the policy module's own arithmetic.

Decisions where the docs are silent:

* The resource is vcores (LTRF is single-resource); ``R`` is the vcores of the running
  NodeManagers at that poll.
* Entitled at a poll: a queue with used or pending vcores then, or with counted usage before.
* A gap between polls longer than ``max_gap_ms`` (the sidecar or the RM was down) is not
  integrated: nobody measured it, and stretching the last value over it would invent usage.
* Lending (seed 002, 9.4.2): by default a queue lends only what another queue used beyond its
  entitlement (``app.control.lending``); ``lending="entitlement"`` keeps the former reading in
  which all unused entitlement counts as lent. Each row says what the queue lent and borrowed
  over its interval and to whom it lent.
* Restart safety is the caller's: the ledger advances from the end of the last stored interval,
  and a stored interval is keyed by its start, so the same interval can never be counted twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any

from app.control import lending as lending_rule
from app.domain.observation import ClusterTotals, SamplePoint
from app.policies.ltrf import core as ltrf

# The ledger's state is LTRF's own (counted usage, debt, totals per queue): every other module
# names it through here, so the LTRF folder stays a policy behind the registry.
LedgerState = ltrf.LtrfState


@dataclass(frozen=True, slots=True)
class Poll:
    """Every managed queue's sample at one poll, with the cluster's size then."""

    taken_ms: int
    total: ClusterTotals
    points: Mapping[str, SamplePoint]


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One queue over ``[start_ms, end_ms)``; amounts in vcore-seconds."""

    queue: str
    start_ms: int
    end_ms: int
    weight: float
    entitlement: float
    usage: float
    counted: float
    debt: float
    total_usage: float
    total_counted: float
    lent: float = 0.0
    borrowed: float = 0.0
    lent_to: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        out = asdict(self)
        out["lent_to"] = dict(self.lent_to)
        return out


@dataclass(frozen=True, slots=True)
class LedgerStep:
    """The ledger after integrating some polls: new state, one row per queue, integrated span."""

    state: ltrf.LtrfState
    rows: tuple[LedgerRow, ...]
    start_ms: int
    end_ms: int
    skipped_gaps_s: float


def _entitled(queue: str, point: SamplePoint | None, state: ltrf.LtrfState) -> bool:
    busy = point is not None and (point.used_vcores > 0 or point.pending_vcores > 0)
    return busy or state.counted.get(queue, 0.0) > 0


def rectangle(
    state: ltrf.LtrfState,
    here: Poll,
    dt_s: float,
    weights: Mapping[str, float],
    discount: float,
    lending: str = lending_rule.USED,
) -> tuple[ltrf.LtrfState, dict[str, float], dict[str, float], lending_rule.Loans]:
    """One rectangle of ``integrate``: ``here``'s usage held for ``dt_s`` seconds. Returns the new
    state with the usage, entitlements and loans it was counted from (the rows' amounts).

    The simulator advances its ledger one rectangle per tick and reads only the state, so it
    calls this directly instead of building rows nobody reads."""
    used = {q: here.points[q].used_vcores if q in here.points else 0.0 for q in weights}
    members = [q for q in weights if _entitled(q, here.points.get(q), state)]
    ent = ltrf.entitlements(weights, members, here.total.vcores)
    loans = lending_rule.loans(used, ent, lending)
    state = ltrf.account_usage(state, used, ent, dt_s, discount, loans.debt_rate(weights))
    return state, used, ent, loans


def integrate(
    state: ltrf.LtrfState,
    polls: Sequence[Poll],
    weights: Mapping[str, float],
    discount: float,
    max_gap_ms: int,
    lending: str = lending_rule.USED,
) -> LedgerStep | None:
    """Integrate consecutive ``polls`` (oldest first) into ``state``; ``None`` with fewer than 2.

    ``weights`` names the managed queues (``w_i``); ``lending`` is a ``lending.MODES`` value.
    """
    if len(polls) < 2:
        return None
    before = state
    usage = {q: 0.0 for q in weights}
    entitled = {q: 0.0 for q in weights}
    lent = {q: 0.0 for q in weights}
    borrowed = {q: 0.0 for q in weights}
    lent_to: dict[str, dict[str, float]] = {q: {} for q in weights}
    gaps = 0.0
    for here, after in pairwise(polls):
        dt_ms = after.taken_ms - here.taken_ms
        if dt_ms <= 0:
            continue
        if dt_ms > max_gap_ms:
            gaps += dt_ms / 1000
            continue
        dt_s = dt_ms / 1000
        state, used, ent, loans = rectangle(state, here, dt_s, weights, discount, lending)
        for q in weights:
            usage[q] += used[q] * dt_s
            entitled[q] += ent[q] * dt_s
            lent[q] += loans.lent.get(q, 0.0) * dt_s
            borrowed[q] += loans.borrowed.get(q, 0.0) * dt_s
            for other, rate in loans.to.get(q, {}).items():
                lent_to[q][other] = lent_to[q].get(other, 0.0) + rate * dt_s
    start, end = polls[0].taken_ms, polls[-1].taken_ms
    rows = tuple(
        LedgerRow(
            queue=q,
            start_ms=start,
            end_ms=end,
            weight=w,
            entitlement=entitled[q],
            usage=usage[q],
            counted=state.counted.get(q, 0.0) - before.counted.get(q, 0.0),
            debt=state.debt.get(q, 0.0),
            total_usage=state.total_alloc.get(q, 0.0),
            total_counted=state.counted.get(q, 0.0),
            lent=lent[q],
            borrowed=borrowed[q],
            lent_to=dict(sorted(lent_to[q].items())),
        )
        for q, w in sorted(weights.items())
    )
    return LedgerStep(state, rows, start, end, gaps)
