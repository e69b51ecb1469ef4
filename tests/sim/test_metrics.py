"""Metrics on tiny hand-computed cases (thesis 4.2, 5.4; Fawkes eqs. 2-3; LTRF 9.4.4)."""

from __future__ import annotations

import numpy as np
import pytest

from app.sim import metrics
from app.sim.jobs import JobRun, SimJob, Status


def test_jain() -> None:
    assert metrics.jain([1, 1, 1]) == pytest.approx(1.0)
    # (1 + 0)^2 / (2 * 1) = 0.5
    assert metrics.jain([1, 0]) == pytest.approx(0.5)
    # (1 + 2 + 3)^2 / (3 * 14) = 36 / 42
    assert metrics.jain([1, 2, 3]) == pytest.approx(36 / 42)
    assert metrics.jain([0, 0]) is None and metrics.jain([]) is None


def test_fraction_of_demand_caps_at_one() -> None:
    # F = 1 (5 >= 4), 0.5, 0 -> (1.5)^2 / (3 * 1.25) = 0.6
    assert metrics.fraction_of_demand_index([5, 1, 0], [4, 2, 8]) == pytest.approx(0.6)
    a, d = np.array([5.0, 1.0, 0.0]), np.array([4.0, 2.0, 8.0])
    fair, _ = metrics.snapshot_indexes(a, d, metrics.AllocationTally())
    assert fair == pytest.approx(0.6)


def test_equality_weights_classes_by_size() -> None:
    # class demand 2: allocations 2, 0 -> 0.5 (2 jobs); class demand 5: 3 -> 1 (1 job)
    # weighted: (0.5 * 2 + 1 * 1) / 3 = 2/3
    allocs, demands = [2.0, 0.0, 3.0], [2.0, 2.0, 5.0]
    assert metrics.equality_index(allocs, demands) == pytest.approx(2 / 3)
    _, eq = metrics.snapshot_indexes(np.array(allocs), np.array(demands), metrics.AllocationTally())
    assert eq == pytest.approx(2 / 3)


def _run(work: float, status: Status, consumed: float) -> JobRun:
    r = JobRun(SimJob(f"j{work}{status.value}", 0, 1, work), 1)
    r.status, r.consumed = status, consumed
    return r


def test_sdr_ptr_wtr() -> None:
    runs = [
        _run(10, Status.SUCCEEDED, 10),
        _run(30, Status.MISSED, 30),
        _run(40, Status.KILLED, 15),
        _run(20, Status.DROPPED, 0),
    ]
    out = metrics.outcomes(runs)
    assert out.sdr == pytest.approx(1 / 4)
    assert out.ptr == pytest.approx(10 / 100)
    assert out.wtr == pytest.approx((30 + 15) / 100)
    assert (out.succeeded, out.missed, out.killed, out.dropped) == (1, 1, 1, 1)


def test_utilization_and_slowdown() -> None:
    assert metrics.utilization(50.0, 10, 0.0, 10.0) == pytest.approx(0.5)
    r = JobRun(SimJob("a", 10, 4, 40.0), 4)
    r.status, r.end_s = Status.SUCCEEDED, 40.0
    # ideal runtime 40 / 4 = 10 s, response 30 s
    assert metrics.slowdown(r, 100) == pytest.approx(3.0)
    assert metrics.mean_slowdown_by_queue([r], 100) == {"default": pytest.approx(3.0)}


def test_discrimination_step_and_factor() -> None:
    d, f = metrics.discrimination_step({}, {"a": 0.7, "b": 0.3}, {"a": 0.5, "b": 0.5}, 10)
    assert d == pytest.approx({"a": 2.0, "b": -2.0}) and f == pytest.approx(4.0)
    d, f = metrics.discrimination_step(d, {"a": 0.5, "b": 0.5}, {"a": 0.5, "b": 0.5}, 10)
    assert f == pytest.approx(4.0)


def test_sharing_degree() -> None:
    assert metrics.sharing_degree(150.0, 100.0) == pytest.approx(0.5)
    assert metrics.sharing_degree(50.0, 100.0) == pytest.approx(-0.5)
    assert metrics.sharing_degree(1.0, 0.0) is None


def test_snapshot_indexes_with_tally_match_the_direct_definitions() -> None:
    # fair-share jobs: A = 5 of 4, 1 of 2; tallied: a grant of 3 of 6, a waiting job of demand 2
    tally = metrics.AllocationTally()
    tally.add(3.0, 6.0)
    tally.add(0.0, 2.0)
    tally.add(7.0, 9.0)
    tally.remove(7.0, 9.0)
    fair, eq = metrics.snapshot_indexes(np.array([5.0, 1.0]), np.array([4.0, 2.0]), tally)
    allocs, demands = [5.0, 1.0, 3.0, 0.0], [4.0, 2.0, 6.0, 2.0]
    # F = 1, 0.5, 0.5, 0 -> 4 / (4 * 1.5) = 2/3
    assert fair == pytest.approx(2 / 3)
    assert fair == pytest.approx(metrics.fraction_of_demand_index(allocs, demands))
    # classes: 4 -> {5}: 1; 2 -> {1, 0}: 0.5; 6 -> {3}: 1; weighted (1 + 0.5 * 2 + 1) / 4
    assert eq == pytest.approx(0.75)
    assert eq == pytest.approx(metrics.equality_index(allocs, demands))
