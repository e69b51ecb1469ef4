"""The measured LTRF ledger (``app.control.ledger``): rectangle rule, lending, discount, gaps.
Expected values are hand computations from ``docs/policies.md`` (LTRF)."""

from __future__ import annotations

import pytest

from app.control.ledger import Poll, integrate
from app.domain.observation import ClusterTotals, SamplePoint
from app.policies.ltrf import core as ltrf

TOTAL8 = ClusterTotals(8.0, 8192.0)


def poll(t_s: int, **used: float) -> Poll:
    return Poll(
        t_s * 1000,
        TOTAL8,
        {f"root.{q}": SamplePoint(t_s * 1000, used_vcores=v) for q, v in used.items()},
    )


WEIGHTS = {"root.a": 1.0, "root.b": 1.0}


@pytest.mark.parametrize(("lending", "b_debt"), [("used", 20), ("entitlement", 60)])
def test_rectangle_rule_ledger_by_hand(lending: str, b_debt: float) -> None:
    # [0,10): a 4, b 2, both entitled to 8/2 = 4; [10,20): a 6, b 0 (b still entitled: it has
    # counted usage). a: usage 40 + 60 = 100, entitlement 80, borrowed 2 x 10 = 20, debt -20;
    # b: usage 20, entitlement 80. Lending "used": b lent only what a used beyond its share,
    # 2 x 10 = 20 (its 2 spare vcores in [0,10) went to nobody); "entitlement": all its unused
    # entitlement, 20 + 40 = 60.
    step = integrate(
        ltrf.LtrfState(),
        [poll(0, a=4, b=2), poll(10, a=6, b=0), poll(20, a=1, b=1)],
        WEIGHTS,
        1.0,
        60_000,
        lending,
    )
    assert step is not None
    rows = {r.queue: r for r in step.rows}
    assert (rows["root.a"].usage, rows["root.a"].entitlement, rows["root.a"].debt) == (100, 80, -20)
    assert (rows["root.b"].usage, rows["root.b"].entitlement, rows["root.b"].debt) == (
        20,
        80,
        b_debt,
    )
    assert rows["root.a"].counted == 100 and rows["root.b"].counted == 20
    assert rows["root.a"].borrowed == 20 and rows["root.b"].lent_to == {"root.a": 20}
    assert (step.start_ms, step.end_ms) == (0, 20_000)


def test_discount_counts_borrowed_usage_at_delta() -> None:
    # second rectangle: a uses 6 with entitlement 4: 4 + 0.5 * 2 = 5 per second -> 40 + 50 = 90
    step = integrate(
        ltrf.LtrfState(), [poll(0, a=4, b=2), poll(10, a=6, b=0), poll(20)], WEIGHTS, 0.5, 60_000
    )
    assert step is not None
    assert {r.queue: r.counted for r in step.rows}["root.a"] == 90


def test_gaps_are_not_integrated_and_continuation_does_not_double_count() -> None:
    first = integrate(
        ltrf.LtrfState(), [poll(0, a=4), poll(10, a=4), poll(100, a=4)], WEIGHTS, 1.0, 30_000
    )
    assert first is not None and first.skipped_gaps_s == 90
    assert {r.queue: r.usage for r in first.rows}["root.a"] == 40
    # the next tick starts at the previous end: [100, 110) only
    second = integrate(first.state, [poll(100, a=4), poll(110, a=2)], WEIGHTS, 1.0, 30_000)
    assert second is not None
    assert {r.queue: r.total_usage for r in second.rows}["root.a"] == 80
    assert integrate(ltrf.LtrfState(), [poll(0, a=1)], WEIGHTS, 1.0, 30_000) is None
