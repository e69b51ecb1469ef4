"""Baseline and Reactive FS allocators (thesis seed 004, section 5.2)."""

from __future__ import annotations

import pytest

from app.sim import experiment
from app.sim.cluster import ClusterSpec
from app.sim.jobs import SimJob, Status


@pytest.mark.parametrize("model", ["fluid", "tasks"])
def test_reactive_fs_run_ends_with_its_last_job_not_its_latest_deadline(model: str) -> None:
    # Two 1-task jobs of 10 s on 2 vcores, deadlines far out: both finish at t=10, and the
    # kill timers at t=1000 must not keep the run (makespan, utilization) going.
    jobs = [
        SimJob("a", 0.0, 1, 10.0, deadline_s=1000.0),
        SimJob("b", 0.0, 1, 10.0, deadline_s=500.0),
    ]
    result = experiment.run_policy("reactive-fs", jobs, ClusterSpec(2), model=model)
    base = experiment.run_policy("baseline-fs", jobs, ClusterSpec(2), model=model)
    assert all(r.status is Status.SUCCEEDED and r.end_s == 10.0 for r in result.runs)
    # The run ends at the first 60 s sample after the last job, as Baseline FS's does.
    assert result.end_s == base.end_s < 100.0
    assert result.summary()["utilization"] == base.summary()["utilization"]


def test_reactive_fs_still_kills_at_the_deadline() -> None:
    jobs = [SimJob("a", 0.0, 1, 100.0, deadline_s=30.0)]
    result = experiment.run_policy("reactive-fs", jobs, ClusterSpec(1))
    (run,) = result.runs
    assert run.status is Status.KILLED and run.end_s == pytest.approx(30.0)
    assert run.consumed == pytest.approx(30.0)
