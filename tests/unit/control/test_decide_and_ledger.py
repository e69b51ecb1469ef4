"""The measured LTRF ledger and the policy adapters (issue 5, points 1 and 3). Expected values are
hand computations from ``docs/policies.md`` (LTRF, Fawkes, RRF Table 9.3)."""

from __future__ import annotations

import pytest

from app.control.config import ControlConfig
from app.control.decide import run_fawkes, run_ltrf, run_rrf
from app.control.ledger import Poll, integrate
from app.domain.observation import ClusterTotals, PolicyInputs, QueueInputs, SamplePoint, average
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


def test_interval_averages() -> None:
    pts = [
        SamplePoint(
            0, used_vcores=2, used_memory_mb=1024, pending_containers=4, absolute_capacity=50
        ),
        SamplePoint(
            1, used_vcores=4, used_memory_mb=1024, pending_containers=0, absolute_capacity=50
        ),
    ]
    got = average(pts, TOTAL8, completed=3)
    # mean used 3 vcores of a capacity of 50 % x 8 = 4 vcores; dominant share (2/8, 4/8) -> 0.375
    assert (got.used_vcores, got.pending_containers, got.completed_apps) == (3, 2, 3)
    assert got.vcore_utilization == 0.75 and got.used_fraction == 0.375
    assert got.memory_utilization == 1024 / 4096


def q(
    used_v: float = 0, pend_v: float = 0, pend_c: float = 0, used_m: float = 0, pend_m: float = 0
) -> QueueInputs:
    return QueueInputs(1, used_v, used_m, pend_v, pend_m, pend_c, 0, 1, 0, 0, 0, 0)


def inputs(total: ClusterTotals = TOTAL8, **queues: QueueInputs) -> PolicyInputs:
    return PolicyInputs(60_000, 0, 60, total, {f"root.{k}": v for k, v in queues.items()})


def test_ltrf_serves_the_smaller_history_first_and_mlrf_splits_evenly() -> None:
    # R = 8, demand a 8, b 6, entitlements 4 each, horizon 10 s; counted a 100, b 20.
    # LTRF raises b from 20 until its demand 6 (20 + 60 = 80 < 100), a gets the 2 left.
    cfg = ControlConfig(policy="ltrf", params={"discount": 1.0}, interval_s=10)
    ins = inputs(a=q(used_v=4, pend_v=4), b=q(used_v=2, pend_v=4))
    ledger = ltrf.LtrfState(counted={"root.a": 100, "root.b": 20})
    out = run_ltrf(cfg, ins, ["root.a", "root.b"], ledger, memoryless=False)
    assert out.details["alloc"] == pytest.approx({"root.a": 2, "root.b": 6})
    assert out.shares == pytest.approx({"root.a": 0.25, "root.b": 0.75})
    # MLRF ignores history: 4 and 4
    mlrf = run_ltrf(
        ControlConfig(policy="mlrf", interval_s=10), ins, ["root.a", "root.b"], ledger, True
    )
    assert mlrf.shares == pytest.approx({"root.a": 0.5, "root.b": 0.5})


def test_fawkes_td_first_decision_waterfills_from_pending_containers() -> None:
    cfg = ControlConfig(
        policy="fawkes:TD", params={"weighting": "TD", "tau": 10.0, "interval_s": 60.0}
    )
    out = run_fawkes(cfg, inputs(a=q(pend_c=30), b=q(pend_c=10)), ["root.a", "root.b"], {})
    # w = 30/40, 10/40; first decision: shares = weights (no minimums)
    assert out.shares == pytest.approx({"root.a": 0.75, "root.b": 0.25})
    assert out.details["weights"] == pytest.approx({"root.a": 0.75, "root.b": 0.25})
    assert out.state is not None and out.state["admitted"] == ["root.a", "root.b"]
    assert out.min_change_applies is False


def test_rrf_table_9_3_as_absolute_capacities() -> None:
    # docs/policies.md: RRF gives VM1 <5, 2.5>, VM2 <7, 1>, VM3 <8, 6.5>; memory 2.5 + 1 + 6.5 = 10
    # units rounds by largest remainder (tie 0.5: by name, vm1) to 3, 1, 6
    cfg = ControlConfig(
        policy="rrf",
        params={"algorithm": "rrf"},
        weights={"root.vm1": 1, "root.vm2": 1, "root.vm3": 2},
    )
    ins = inputs(
        ClusterTotals(20, 10),
        vm1=q(used_v=6, used_m=3),
        vm2=q(used_v=8, used_m=1),
        vm3=q(used_v=8, used_m=8),
    )
    out = run_rrf(cfg, ins, ["root.vm1", "root.vm2", "root.vm3"])
    assert out.amounts == {
        "root.vm1": {"vcores": 5, "memory": 2.5},
        "root.vm2": {"vcores": 7, "memory": 1},
        "root.vm3": {"vcores": 8, "memory": 6.5},
    }
    assert out.absolute == {
        "root.vm1": "[memory=3,vcores=5]",
        "root.vm2": "[memory=1,vcores=7]",
        "root.vm3": "[memory=6,vcores=8]",
    }
