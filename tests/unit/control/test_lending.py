"""LTRF's loan agreement in the measured ledger (``app.control.lending``; seed 002, 9.4.2):
lending is what another queue used, the debts sum to zero, and an idle cluster lends nothing."""

from __future__ import annotations

import pytest

from app.control.ledger import Poll, integrate
from app.control.lending import loans
from app.domain.observation import ClusterTotals, SamplePoint
from app.policies.ltrf import core as ltrf

TOTAL8 = ClusterTotals(8.0, 8192.0)
WEIGHTS = {"root.etl": 1.0, "root.adhoc": 1.0, "root.default": 1.0}


def poll(t_s: int, **used: float) -> Poll:
    points = {f"root.{q}": SamplePoint(t_s * 1000, used_vcores=v) for q, v in used.items()}
    return Poll(t_s * 1000, TOTAL8, points)


def test_lenders_share_what_the_borrower_used_in_proportion_to_their_spare() -> None:
    # entitlements 4/2/2; etl uses 1 (spare 3), adhoc 0 (spare 2), default 5 (3 beyond its 2)
    got = loans(
        {"etl": 1.0, "adhoc": 0.0, "default": 5.0}, {"etl": 4.0, "adhoc": 2.0, "default": 2.0}
    )
    assert got.borrowed == {"etl": 0.0, "adhoc": 0.0, "default": 3.0}
    assert got.lent == pytest.approx({"etl": 1.8, "adhoc": 1.2, "default": 0.0})
    assert set(got.to) == {"etl", "adhoc"}
    assert got.to["etl"] == pytest.approx({"default": 1.8})
    assert got.to["adhoc"] == pytest.approx({"default": 1.2})
    assert sum(got.debt_rate(got.lent).values()) == pytest.approx(0.0)


def test_entitlement_mode_counts_unused_entitlement_as_lent() -> None:
    got = loans({"etl": 0.0, "adhoc": 0.0}, {"etl": 4.0, "adhoc": 4.0}, "entitlement")
    assert got.lent == {"etl": 4.0, "adhoc": 4.0} and got.to == {}


def test_ledger_unchanged_over_an_interval_with_no_applications() -> None:
    # etl ran before (counted usage > 0: still entitled), then the cluster is idle for 210 s
    before = ltrf.LtrfState(
        counted={"root.etl": 1000.0},
        debt={"root.etl": -400.0, "root.adhoc": 400.0},
        total_alloc={"root.etl": 1000.0},
    )
    idle = [poll(t) for t in range(0, 211, 30)]
    step = integrate(before, idle, WEIGHTS, 1.0, 60_000)
    assert step is not None
    for key in ("counted", "debt", "total_alloc"):
        after, was = getattr(step.state, key), getattr(before, key)
        assert {q: after.get(q, 0.0) for q in WEIGHTS} == {q: was.get(q, 0.0) for q in WEIGHTS}
    rows = {r.queue: r for r in step.rows}
    assert rows["root.etl"].entitlement == pytest.approx(8 * 210)  # entitled, alone
    assert all(
        (r.lent, r.borrowed, r.usage, r.counted, r.lent_to) == (0, 0, 0, 0, {}) for r in step.rows
    )
    assert rows["root.etl"].debt == -400.0 and rows["root.adhoc"].debt == 400.0
    # the former reading credits etl with all of its idle entitlement: 8 x 210 "lent" to nobody
    old = integrate(before, idle, WEIGHTS, 1.0, 60_000, "entitlement")
    assert old is not None
    assert {r.queue: r.debt for r in old.rows}["root.etl"] == pytest.approx(-400.0 + 1680.0)
