"""The crowd-out calibration (``benchmarks/calibrate_crowd_out.py``): a hold replayed as an
admission at the same round, and the table that sums what admitting did."""

from __future__ import annotations

from types import ModuleType

import pytest

from app.sim import deadlines, experiment, trace
from app.sim.cluster import ClusterSpec
from app.sim.jobs import Status
from app.sim.promise_adapter import PromiseAllocator
from app.sim.runner import Simulation
from tests.sim import scripts


@pytest.fixture(scope="module")
def cc() -> ModuleType:
    return scripts.load("calibrate_crowd_out")


def test_a_hold_is_replayed_as_an_admission_at_the_same_round(cc: ModuleType) -> None:
    # a seeded synthetic cell where Promise holds one job back for the arrivals it would
    # crowd out
    jobs = trace.synthetic(trace.SyntheticSpec(jobs=120), 1)
    cap = experiment.resolve_capacity("1x-mean", jobs)
    dj = deadlines.assign_deadlines(jobs, "Fixed2x", cap, 1)
    holds, rows = cc.calibrate(dj, cap, "fluid", max_holds=5)
    assert holds == len(rows) >= 1
    base = {
        r.job.job_id: r
        for r in Simulation(dj, PromiseAllocator(), ClusterSpec(cap), model="fluid").run().runs
    }
    for row in rows:
        assert row["predicted"] >= 1.0
        # held in the plain run (started later or never), admitted there in the replay
        held = base[row["job"]]
        assert held.start_s is None or held.start_s > row["at_s"]
        assert row["started_s"] == pytest.approx(row["at_s"])
        assert row["own"] == int(row["own"]) and -1 <= row["own"] <= 1
    # recording the holds changes nothing: the same jobs meet their deadlines as without it
    seen: dict[str, tuple[float, float]] = {}
    with cc._recording(seen):
        recorded = cc._run(dj, cap, "fluid")
    assert {k: ok for k, (ok, _) in recorded.items()} == {
        k: r.status is Status.SUCCEEDED for k, r in base.items()
    }
    assert sorted(seen) == sorted(row["job"] for row in rows)


def test_the_table_sums_holds_by_predicted_crowd_out(cc: ModuleType) -> None:
    rows = [
        {"predicted": 1.5, "others": 0, "own": 1},
        {"predicted": 1.2, "others": 2, "own": 1},
        {"predicted": 12.0, "others": 1, "own": 0},
    ]
    text = cc.markdown([{"holds": 4, "rows": rows}])
    lines = text.splitlines()
    assert "| 1 to 2 | 2 | 1.35 | 1.00 | 1.00 | +0.00 | 1 / 0 / 1 |" in lines
    assert "| 10 or more | 1 | 12.00 | 1.00 | 0.00 | -1.00 | 0 / 0 / 1 |" in lines
    assert "| all | 3 | 4.90 | 1.00 | 0.67 | -0.33 | 1 / 0 / 2 |" in lines
    assert "1 cells, 4 holds, 3 replayed." in text
