"""Cluster: water-fill arithmetic, capacity invariant, work conservation, fluid completion times."""

from __future__ import annotations

import random
from functools import partial

import numpy as np
import pytest

from app.sim.cluster import Cluster, ClusterSpec, level_for, queue_fill, water_fill
from app.sim.engine import Engine
from app.sim.jobs import JobRun, SimJob, Status


def test_water_fill_caps_and_redistributes() -> None:
    # 10 over caps 2, 5, 100 with equal weights: 2, then (8 / 2) = 4 each but 5 is not hit -> 4, 4
    assert water_fill(10, [2, 5, 100], [1, 1, 1]) == pytest.approx([2, 4, 4])
    # weights 1:3 of 8 -> 2 and 6
    assert water_fill(8, [100, 100], [1, 3]) == pytest.approx([2, 6])


def test_queue_fill_lends_idle_share_and_respects_maximum() -> None:
    # a wants 2 of its 5 (share 0.5 of 10); b borrows the rest up to its demand 9
    assert queue_fill(10, [2, 9], [0.5, 0.5], [10, 10]) == pytest.approx([2, 8])
    # b capped at maximum 6: 2 vcores stay idle
    assert queue_fill(10, [2, 9], [0.5, 0.5], [10, 6]) == pytest.approx([2, 6])
    # a share-0 queue still borrows what nobody else wants
    assert queue_fill(10, [3, 4], [0.0, 1.0], [10, 10]) == pytest.approx([3, 4])


def test_level_for_matches_hand_computation() -> None:
    caps = np.array([1.0, 1.0, 10.0, 10.0])
    # 12 vcores: both 1-task jobs get 1, the two big ones 5 each
    assert level_for(12.0, caps) == pytest.approx(5.0)
    assert level_for(2.0, caps) == pytest.approx(0.5)
    assert level_for(30.0, caps) == float("inf")


def _cluster(vcores: int) -> tuple[Engine, Cluster, list[JobRun]]:
    eng = Engine()
    ended: list[JobRun] = []
    return eng, Cluster(eng, ClusterSpec(vcores), ended.append), ended


def test_two_equal_jobs_share_and_finish_together() -> None:
    eng, cl, ended = _cluster(10)
    a = JobRun(SimJob("a", 0, 10, 100.0), 10)
    b = JobRun(SimJob("b", 0, 10, 100.0), 10)
    cl.start_fair(a)
    cl.start_fair(b)
    eng.run()
    # each gets 5 vcores: 100 / 5 = 20 s
    assert [r.end_s for r in ended] == pytest.approx([20.0, 20.0])
    assert cl.busy_integral == pytest.approx(200.0)


def test_late_arrival_reshares_remaining_work() -> None:
    eng, cl, ended = _cluster(10)
    a = JobRun(SimJob("a", 0, 10, 100.0), 10)
    b = JobRun(SimJob("b", 5, 10, 50.0), 10)
    cl.start_fair(a)
    eng.schedule(5.0, lambda: cl.start_fair(b))
    eng.run()
    # a alone 5 s at 10 -> 50 left; then 5 each: b done at 5 + 10 = 15, a then has 0 left too
    by_id = {r.job.job_id: r.end_s for r in ended}
    assert by_id == pytest.approx({"a": 15.0, "b": 15.0})


def test_fixed_grant_must_fit_and_completes_at_work_over_grant() -> None:
    eng, cl, ended = _cluster(8)
    a = JobRun(SimJob("a", 0, 10, 60.0, deadline_s=20.0), 8)
    cl.start_fixed(a, 3)
    with pytest.raises(ValueError):
        cl.start_fixed(JobRun(SimJob("b", 0, 10, 1.0), 8), 6)
    eng.run()
    assert ended[0].end_s == pytest.approx(20.0) and ended[0].status is Status.SUCCEEDED


def test_kill_counts_consumed_work() -> None:
    eng, cl, _ = _cluster(4)
    a = JobRun(SimJob("a", 0, 4, 100.0), 4)
    cl.start_fair(a)
    eng.schedule(10.0, lambda: cl.kill(a, "test"))
    eng.run()
    assert a.status is Status.KILLED and a.consumed == pytest.approx(40.0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_never_over_capacity_and_work_conserving(seed: int) -> None:
    rng = random.Random(seed)
    eng, cl, ended = _cluster(16)
    for q in ("a", "b", "c"):
        cl.queue_index(q)
    cl.set_shares({"a": 0.6, "b": 0.3, "c": 0.1}, {"a": 1.0, "b": 1.0, "c": 1.0})
    jobs = [
        SimJob(
            f"j{i}",
            rng.uniform(0, 200),
            rng.choice([1, 2, 8, 40]),
            rng.uniform(5, 400),
            queue=rng.choice("abc"),
        )
        for i in range(60)
    ]
    checks: list[tuple[float, float, float]] = []

    def check() -> None:
        n = cl.pool.n
        used = float(cl.pool.rate[:n].sum())
        demand = float(cl.pool.cap[:n].sum())
        checks.append((used, demand, eng.now))

    for j in jobs:
        run = JobRun(j, min(j.tasks, 16))
        eng.schedule(j.submit_s, partial(cl.start_fair, run))
        eng.schedule(j.submit_s, check, priority=9)
    eng.run()
    assert len(ended) == len(jobs)
    for used, demand, _ in checks:
        assert used <= 16 + 1e-9
        assert used == pytest.approx(min(16.0, demand))
