"""Promise's planner (``app/policies/promise/core.py``) on hand-computed rounds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from app.policies.base import PolicyError
from app.policies.promise import core, loss
from app.policies.promise.estimator import (
    Estimator,
    EstimatorParams,
    Outcome,
    rebuild,
)
from app.policies.promise.model import progress_end
from app.policies.promise.signature import Keys
from tests.unit.policies.promise.support import OTHER, K, P, taught

DIVISIBLE = core.PromiseParams(divisible=True)


def test_divisible_work_keeps_the_waves_margin_and_prices_an_exact_grant() -> None:
    est = taught(0.5)  # bound: 200 vcore-s for 4 tasks, 50 s per task
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    # 70 s left: whole waves need one wave of 4; the work alone needs 200 / 70 = 2.86, so 3.
    (d,) = core.admit([job], [], 10, 10, 30.0, est, DIVISIBLE)
    assert (d.action, d.cpus, d.finish_s) == ("admit", 4, 80.0)  # the waves' grant fits: kept
    (d,) = core.admit([job], [], 3, 10, 30.0, est, P)
    assert d.action == "queue"  # planned in waves, 3 vcores are not enough
    (d,) = core.admit([job], [], 3, 10, 30.0, est, DIVISIBLE)
    assert (d.action, d.cpus) == ("admit", 3)  # no arrival rate: nothing to price it against
    assert d.finish_s == pytest.approx(30.0 + 200.0 / 3)
    # Priced as a try: its bound is the largest of 3 runs, which a fourth exceeds 1 time in 4;
    # a miss would waste 3 x 70 = 210 vcore-s, worth it when the arrivals' mean work exceeds
    # 0.25 x 210 / 0.75 = 70 vcore-s.
    cheap = core.Load(jobs_per_s=0.01, vcores=1.0)  # mean work 100
    (d,) = core.admit([job], [], 3, 10, 30.0, est, DIVISIBLE, cheap)
    assert (d.action, d.cpus) == ("admit", 3)
    dear = core.Load(jobs_per_s=0.01, vcores=0.5)  # mean work 50
    (d,) = core.admit([job], [], 3, 10, 30.0, est, DIVISIBLE, dear)
    assert d.action == "queue" and "4 vcores for its waves' margin" in d.reason
    assert "about 1 in 4 for a bound from 3 runs" in d.reason
    # With 19 runs the bound holds 19 times in 20: the same price is worth it at mean work 50.
    (d,) = core.admit([job], [], 3, 10, 30.0, taught(0.5, runs=19), DIVISIBLE, dear)
    assert (d.action, d.cpus) == ("admit", 3)


def test_divisible_work_takes_a_margin_where_the_exact_grant_is_not_worth_its_miss() -> None:
    est = taught(0.5)  # 3 runs, each 0.5 of the deadline on all tasks: 500 vcore-s for 10 tasks
    job = core.WaitingJob("a", tasks=10, deadline_s=100.0, submitted_s=0.0, keys=K)
    # 70 s left: one whole wave needs 10 vcores, the bound alone 500 / 70 = 7.1, so 8. On 8 a
    # miss (1 in 4) wastes 8 x 70 = 560 vcore-s: worth it only if the arrivals' mean work is
    # above 0.25 x 560 / 0.75 = 187. On 9 the bound ends at 55.6 s and a run of up to 630
    # vcore-s still meets the deadline: past the largest run, a fourth run is taken as equally
    # likely up to the 1,000 the deadline allowed from submission, a chance of
    # (3 + 130 / 500) / 4 = 0.815, worth a miss of 630 vcore-s above a mean work of 143.
    calm = core.Load(jobs_per_s=0.01, vcores=1.6)  # mean work 160
    (d,) = core.admit([job], [], 9, 20, 30.0, est, DIVISIBLE, calm)
    assert (d.action, d.cpus) == ("admit", 9)
    assert d.finish_s == pytest.approx(30.0 + 500.0 / 9)
    assert "a margin: on exactly the 8 its bound needs" in d.reason
    assert "on 9 its runs give it a chance of 0.815" in d.reason
    # Nothing wider is free: it waits, as before.
    (d,) = core.admit([job], [], 8, 20, 30.0, est, DIVISIBLE, calm)
    assert d.action == "queue" and "10 vcores for its waves' margin" in d.reason
    # At a mean work of 100 the margin is not worth its miss either.
    (d,) = core.admit([job], [], 9, 20, 30.0, est, DIVISIBLE, core.Load(0.01, 1.0))
    assert d.action == "queue"
    # Twice the arrivals at twice the size (the same mean work): holding all 9 free vcores
    # for 55.6 s turns away 0.02 x 55.6 = 1.1 of them, more than the job is worth.
    (d,) = core.admit([job], [], 9, 20, 30.0, est, DIVISIBLE, core.Load(0.02, 3.2))
    assert d.action == "queue"


def test_a_margin_leaves_room_for_the_arrivals_it_would_turn_away() -> None:
    est = taught(0.5)
    job = core.WaitingJob("a", tasks=20, deadline_s=100.0, submitted_s=0.0, keys=K)
    # Bound 1,000 vcore-s, 70 s left: 15 vcores exactly (not worth a miss at a mean work of
    # 330), 20 for a whole wave. Of the 19 free, all 19 give the larger chance (0.833), but
    # 16 leave room for the arrivals, each needing 3 vcores: 0.780 less 0.14 crowded out is
    # worth more than 0.833 less 0.53.
    sized = core.Load(0.01, 3.3, sizes=loss.Sizes.of([330.0] * 4, [3.0] * 4))
    (d,) = core.admit([job], [], 19, 40, 30.0, est, DIVISIBLE, sized)
    assert (d.action, d.cpus) == ("admit", 16)
    assert "on 16 its runs give it a chance of 0.780" in d.reason


def test_admits_the_smallest_wave_aligned_grant() -> None:
    est = taught(0.5)  # bound: 0.5 * 100 s * 4 tasks = 200 vcore-s, 50 s per task
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    (d,) = core.admit([job], [], free=10, capacity=10, now_s=0.0, estimator=est, params=P)
    # 2 waves of 50 s meet the 100 s deadline with 2 containers; 8 stay free for arrivals
    assert (d.action, d.cpus, d.start_s, d.finish_s) == ("admit", 2, 0.0, 100.0)
    (d,) = core.admit([job], [], free=10, capacity=10, now_s=30.0, estimator=est, params=P)
    assert (d.action, d.cpus, d.finish_s) == ("admit", 4, 80.0)  # 70 s left: one wave of 4
    (d,) = core.admit([job], [], free=1, capacity=10, now_s=0.0, estimator=est, params=P)
    assert d.action == "queue" and d.latest_start_s == pytest.approx(50.0)


def test_a_job_that_would_crowd_out_more_than_one_arrival_waits() -> None:
    est = taught(0.5)
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    # Arrivals need 9 vcores on average; after a grant of 2, 8 are free: 1 vcore short, so the
    # job takes 1/9 of the arrivals' demand for 100 s. At 0.05 jobs/s that is 0.56 jobs: admit.
    calm = core.Load(jobs_per_s=0.05, vcores=9.0)
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, calm)
    assert d.action == "admit"
    # At 0.1 jobs/s it is 1.1 jobs: one met deadline is not worth more than one lost.
    busy = core.Load(jobs_per_s=0.1, vcores=9.0)
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, busy)
    assert d.action == "queue" and "crowd out about 1.1" in d.reason
    # the number behind the hold, for the audit record and the job's ETA
    assert d.crowd_out == pytest.approx(10 / 9, rel=1e-3)
    assert d.to_dict()["crowd_out"] == d.crowd_out
    # An operator who values processed work over the count turns the rule off.
    off = core.PromiseParams(crowd_out=False)
    (d,) = core.admit([job], [], 10, 10, 0.0, est, off, busy)
    assert d.action == "admit"


def test_arrivals_find_what_running_jobs_release_before_the_hold_ends() -> None:
    est = taught(0.5)
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    busy = core.Load(jobs_per_s=0.1, vcores=9.0)
    # 10 of 20 vcores run a job bounded to end at 20 s (one wave of 0.5 * 40 s). Arrivals are
    # 1 vcore short beside a's grant of 2 only until then: 20 s x 1/9 x 0.1 jobs/s = 0.22 jobs.
    ending = core.RunningJob("r", 10, 40.0, 0.0, 0.0, 10, K)
    (d,) = core.admit([job], [ending], 10, 20, 0.0, est, P, busy)
    assert (d.action, d.cpus) == ("admit", 2)
    # Bounded to end with a's hold instead (one wave of 0.5 * 200 s): 100 s x 1/9 x 0.1 = 1.1.
    long = core.RunningJob("r", 10, 200.0, 0.0, 0.0, 10, K)
    (d,) = core.admit([job], [long], 10, 20, 0.0, est, P, busy)
    assert d.action == "queue" and "crowd out about 1.1 arriving" in d.reason


def test_arrivals_find_running_jobs_ended_at_their_central_estimate() -> None:
    est = taught(0.5, runs=19)  # a: 2 waves of 50 s on 2 vcores, bound and centre alike
    for i in range(19):  # r's signature: 18 runs used 0.1 of their window, one 0.5
        ratio = 0.5 if i == 0 else 0.1
        est.learn(Outcome(OTHER, tasks=10, work=ratio * 2000.0, deadline_s=200.0, max_cpus=10))
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    busy = core.Load(jobs_per_s=0.1, vcores=9.0)
    # r's bound ends it at 100 s (0.5 x 200 s), its central estimate at 20 s. The arrivals a
    # crowds out are an expectation, so they find r's vcores at 20 s: 20 s x 1/9 x 0.1 jobs/s
    # = 0.22 jobs, and a is admitted. At r's bounded end it would be 1.1 jobs, and a would wait.
    r = core.RunningJob("r", 10, 200.0, 0.0, 0.0, 10, OTHER)
    (d,) = core.admit([job], [r], 10, 20, 0.0, est, P, busy)
    assert (d.action, d.cpus) == ("admit", 2)
    assert loss.crowded_out(busy, 10, [(20.0, 10)], 0.0, 2, 100.0, 200.0, 20) == pytest.approx(
        0.1 * 20.0 / 9.0
    )
    assert loss.crowded_out(busy, 10, [(100.0, 10)], 0.0, 2, 100.0, 200.0, 20) >= 1.0


def test_a_job_that_cannot_finish_on_the_whole_cluster_is_dropped_with_its_earliest_finish() -> (
    None
):
    est = taught(1.0)  # bound: the whole deadline at full parallelism
    job = core.WaitingJob("late", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    (d,) = core.admit([job], [], free=10, capacity=10, now_s=20.0, estimator=est, params=P)
    assert d.action == "drop" and d.earliest_finish_s == pytest.approx(120.0)
    # times in the reason are relative to the round (live, absolute ones are epoch seconds)
    assert d.reason.startswith(
        "cannot finish by its deadline now+80.0s: at best 4 vcores from now+0.0s finish at "
        "now+100.0s"
    )


def test_a_job_that_fits_once_running_jobs_end_waits_with_an_eta() -> None:
    est = taught(0.5)
    running = core.RunningJob("r", 4, 100.0, 0.0, started_s=0.0, cpus=4, keys=K)  # ends by 50
    job = core.WaitingJob("w", tasks=4, deadline_s=200.0, submitted_s=10.0, keys=K)
    decisions = core.admit(
        [job], [running], free=0, capacity=4, now_s=10.0, estimator=est, params=P
    )
    (d,) = decisions
    # bound 0.5 * 200 * 4 = 400 vcore-s, 100 s per task; from 50 s, 1 wave of 4 ends at 150
    assert d.action == "queue" and d.start_s == pytest.approx(50.0)
    assert d.finish_s == pytest.approx(150.0) and d.waits_for is not None


def test_smaller_jobs_are_offered_capacity_first() -> None:
    est = taught(0.5, keys=K)
    big = core.WaitingJob("big", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    small = core.WaitingJob("small", tasks=1, deadline_s=100.0, submitted_s=5.0, keys=K)
    out = {d.job_id: d for d in core.admit([big, small], [], 2, 10, 5.0, est, P)}
    # small: bound 0.5 * 100 * 1 = 50 -> 1 container; big needs 2 of the 1 left -> waits
    assert out["small"].action == "admit" and out["small"].cpus == 1
    assert out["big"].action == "queue"


def test_the_job_with_least_slack_is_offered_capacity_first() -> None:
    # 19 runs each: enough for each signature's own 0.95 quantile of ratios
    est = taught(0.9, runs=19, keys=K)
    for _ in range(19):
        est.learn(Outcome(OTHER, tasks=4, work=0.1 * 100.0 * 4, deadline_s=100.0, max_cpus=4))
    # tight: bound 0.9 * 50 * 2 = 90 -> 45 s a task; only one wave fits its 50 s: 2 containers,
    # latest start 5. loose: its own runs took 10 s a task, which task seconds predicted
    # exactly (the ratios of its first runs came from K's): one container, latest start 390.
    tight = core.WaitingJob("tight", tasks=2, deadline_s=50.0, submitted_s=0.0, keys=K)
    loose = core.WaitingJob("loose", tasks=1, deadline_s=400.0, submitted_s=0.0, keys=OTHER)
    out = {d.job_id: d for d in core.admit([loose, tight], [], 2, 10, 0.0, est, P)}
    # Both cannot hold the 2 free vcores; the loose one can wait, the tight one cannot.
    assert (out["tight"].action, out["tight"].cpus) == ("admit", 2)
    assert out["loose"].action == "queue" and out["loose"].latest_start_s == pytest.approx(390)


def test_late_jobs_are_killed_unless_small_and_still_teaching_their_signature() -> None:
    est = taught(0.5, keys=K)  # K has 3 runs: nothing more to learn
    late = core.RunningJob("late", 4, 100.0, 0.0, started_s=0.0, cpus=2, keys=K)
    new = core.RunningJob("new", 1, 100.0, 0.0, started_s=0.0, cpus=1, keys=OTHER)
    out = {d.job_id: d for d in core.admit([], [late, new], 0, 10, 150.0, est, P)}
    assert out["late"].action == "kill" and out["late"].cpus == 2
    assert out["new"].action == "keep"  # OTHER has no runs yet and holds 1 vcore


def test_a_job_whose_first_wave_shows_it_will_miss_is_killed_before_its_deadline() -> None:
    est = taught(0.5, keys=K)  # bound: 4 tasks x 50 s of work; K has nothing more to learn
    # 4 tasks on 2 vcores: 2 waves. Its first tasks have run 60 s without ending at t = 60, so
    # the second wave ends at 120 s at the earliest, after its deadline at 100 s.
    slow = core.RunningJob("slow", 4, 100.0, 0.0, 0.0, 2, K, task_floor_s=60.0)
    # 40 s so far: 2 x 40 = 80 s <= 100 s, it may still make it
    ok = core.RunningJob("ok", 4, 100.0, 0.0, 0.0, 2, K, task_floor_s=40.0)
    # a one-task job of a signature still learning runs on, as a late one would
    small = core.RunningJob("small", 1, 50.0, 0.0, 0.0, 1, OTHER, task_floor_s=60.0)
    out = {d.job_id: d for d in core.admit([], [slow, ok, small], 5, 10, 60.0, est, P)}
    assert out["slow"].action == "kill" and out["slow"].cpus == 2
    assert "first tasks ran 60s" in out["slow"].reason and "2 waves" in out["slow"].reason
    assert "ok" not in out
    assert out["small"].action == "keep"
    # the verdict comes at start + (deadline - start) / waves: 50 s for both 2-wave jobs
    assert core.first_wave_verdict_s(slow) == pytest.approx(50.0)


def test_a_running_job_slower_than_its_bound_frees_its_vcores_later_in_the_eta() -> None:
    est = taught(0.5, keys=K)
    # 8 tasks on the whole 4-vcore cluster, 2 waves; its bound is 25 s a task (ratio 0.5 of a
    # 100 s deadline on 4 vcores), so it would free them at 50 s. Its first wave took 40 s:
    # 2 x 40 = 80 s still meets the deadline, and the vcores free up at 80 s, not 50 s.
    r = core.RunningJob("r", 8, 100.0, 0.0, 0.0, 4, K, task_floor_s=40.0)
    waiting = core.WaitingJob("w", 4, 300.0, 45.0, K)
    out = {d.job_id: d for d in core.admit([waiting], [r], 0, 4, 45.0, est, P)}
    assert "r" not in out
    assert out["w"].action == "queue" and out["w"].start_s == pytest.approx(80.0)
    unseen = dataclasses.replace(r, task_floor_s=0.0)
    assert core.admit([waiting], [unseen], 0, 4, 45.0, est, P)[0].start_s == pytest.approx(50.0)


def test_am_containers_are_booked_and_floor_counts_them() -> None:
    est = taught(1.0)
    params = core.PromiseParams(am_containers=1)
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    # 4 tasks need all 4 containers for the 100 s window, plus 1 AM: 4 free is not enough
    (d,) = core.admit([job], [], free=4, capacity=10, now_s=0.0, estimator=est, params=params)
    assert d.action == "queue"
    (d,) = core.admit([job], [], free=5, capacity=10, now_s=0.0, estimator=est, params=params)
    assert d.action == "admit" and d.cpus == 4
    running = [
        core.RunningJob("a", 4, 100.0, 0.0, 0.0, 4, K),
        core.RunningJob("b", 1, 9, 0, 0, 1, K),
    ]
    assert core.booked_floor(running, params) == 7


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(PolicyError, match="capacity"):
        core.admit([], [], 0, 0, 0.0, Estimator(), P)
    with pytest.raises(PolicyError, match="quantile"):
        core.make_params({"quantile": 0.2})


def test_start_up_is_planned_before_the_first_task() -> None:
    est = taught(0.5)  # work bound: half of deadline x tasks
    for _ in range(3):  # three runs of this job took 20 s from admission to their first task
        est.learn(Outcome(K, tasks=4, work=200.0, deadline_s=100.0, max_cpus=4, overhead_s=20.0))
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    (d,) = core.admit([job], [], free=10, capacity=10, now_s=0.0, estimator=est, params=P)
    # 50 s per task; 100 s less 20 s of start-up leave 80 s: one wave, on 4 containers (without
    # the start-up 2 containers and 2 waves would have ended exactly at the deadline)
    assert (d.action, d.cpus, d.start_s, d.finish_s) == ("admit", 4, 0.0, 70.0)
    tight = core.WaitingJob("b", tasks=4, deadline_s=30.0, submitted_s=0.0, keys=K)
    (d,) = core.admit([tight], [], free=10, capacity=10, now_s=0.0, estimator=est, params=P)
    # 15 s per task would fit 30 s; after 20 s of start-up the best finish is 35 s
    assert d.action == "drop" and d.earliest_finish_s == pytest.approx(35.0)
    # a running job's end is its start, its start-up and its waves: 0 + 20 + 50 s
    running = core.RunningJob("r", 4, 100.0, 0.0, 0.0, 4, K)
    late = core.WaitingJob("c", tasks=4, deadline_s=200.0, submitted_s=10.0, keys=K)
    (d,) = core.admit([late], [running], free=0, capacity=4, now_s=10.0, estimator=est, params=P)
    # it starts when those 4 vcores free at 70 s and ends after its own start-up and one wave
    assert (d.action, d.start_s, d.finish_s) == ("queue", 70.0, 190.0)


def test_a_new_sidecar_plans_the_start_up_prior_before_it_knows_any() -> None:
    # 3 tasks whose bound is 8.95 s each and a 30 s deadline: 3 waves on one container end at
    # 26.85 s if tasks start at admission; with the 10 s start-up prior 2 waves fit, on 2
    runs = [Outcome(K, tasks=3, work=26.85, deadline_s=30.0, max_cpus=3) for _ in range(3)]
    job = core.WaitingJob("a", tasks=3, deadline_s=30.0, submitted_s=0.0, keys=K)
    grants = {}
    for prior in (0.0, 10.0):
        est = rebuild(runs, EstimatorParams(startup_s=prior))
        (d,) = core.admit([job], [], free=8, capacity=8, now_s=0.0, estimator=est, params=P)
        grants[prior] = (d.action, d.cpus, round(d.finish_s or 0, 2))
    assert grants == {0.0: ("admit", 1, 26.85), 10.0: ("admit", 2, 27.9)}
    # with no history at all a job is still admitted at full parallelism, due at its deadline
    est = Estimator(EstimatorParams(startup_s=10.0))
    (d,) = core.admit([job], [], free=8, capacity=8, now_s=0.0, estimator=est, params=P)
    assert (d.action, d.cpus, d.finish_s, d.source) == ("admit", 3, 30.0, "bootstrap")


def _one_task_runs(*works: float) -> Estimator:
    est = Estimator()
    for w in works:
        est.learn(Outcome(K, tasks=1, work=w, deadline_s=None, max_cpus=1))
    return est


def test_a_one_task_job_whose_central_estimate_fits_is_tried_when_a_vcore_is_free() -> None:
    # task seconds 10, 11, 12, 13, 20: bound (0.95, nearest rank) 20, central value 12
    est = _one_task_runs(10, 11, 12, 13, 20)
    job = core.WaitingJob("one", tasks=1, deadline_s=15.0, submitted_s=0.0, keys=K)
    (d,) = core.admit([job], [], free=4, capacity=4, now_s=0.0, estimator=est, params=P)
    assert (d.action, d.cpus, d.finish_s, d.work_bound) == ("admit", 1, 12.0, 20.0)
    assert d.reason.startswith("tried on 1 vcores")
    # no vcore free: it waits while its central estimate can still finish in time
    (d,) = core.admit([job], [], free=0, capacity=4, now_s=0.0, estimator=est, params=P)
    assert d.action == "queue" and d.latest_start_s == pytest.approx(3.0)
    # past that, the honest answer: dropped with the earliest finish its bound allows
    (d,) = core.admit([job], [], free=4, capacity=4, now_s=4.0, estimator=est, params=P)
    assert d.action == "drop" and d.earliest_finish_s == pytest.approx(24.0)


def test_without_an_arrival_rate_only_one_task_jobs_are_tried_after_promised_jobs() -> None:
    est = _one_task_runs(10, 11, 12, 13, 20)
    promised = core.WaitingJob("promised", tasks=1, deadline_s=30.0, submitted_s=0.0, keys=K)
    tried = core.WaitingJob("tried", tasks=1, deadline_s=15.0, submitted_s=0.0, keys=K)
    two = core.WaitingJob("two", tasks=2, deadline_s=30.0, submitted_s=0.0, keys=K)
    out = {d.job_id: d for d in core.admit([tried, promised], [], 1, 4, 0.0, est, P)}
    assert (out["promised"].action, out["tried"].action) == ("admit", "queue")
    # two tasks: 2 x 12 s on one vcore would fit 30 s, but only whole one-vcore jobs are tried
    (d,) = core.admit([two], [], free=4, capacity=4, now_s=0.0, estimator=est, params=P)
    assert d.action == "admit" and d.cpus == 2  # its bound fits on 2: promised, not tried
    (d,) = core.admit([two], [], free=4, capacity=4, now_s=12.0, estimator=est, params=P)
    assert d.action == "drop"  # bound misses; central 12 s on 2 would fit, but it is not tried
    # learn_cpus 0 turns trying off
    off = core.PromiseParams(learn_cpus=0)
    (d,) = core.admit([tried], [], free=4, capacity=4, now_s=0.0, estimator=est, params=off)
    assert d.action == "drop"


def _four_task_runs(*task_s: float) -> Estimator:
    est = Estimator()
    for t in task_s:
        est.learn(Outcome(K, tasks=4, work=4 * t, deadline_s=None, max_cpus=4))
    return est


def test_a_larger_job_is_tried_when_its_chance_is_worth_what_a_miss_would_waste() -> None:
    # works 40, 44, 48, 52, 80: bound one 20 s wave on 4 vcores misses a 15 s deadline; four of
    # five runs (p = 0.8) fit in one 15 s wave. A miss wastes 4 vcores x 15 s = 60.
    est = _four_task_runs(10, 11, 12, 13, 20)
    job = core.WaitingJob("big", tasks=4, deadline_s=15.0, submitted_s=0.0, keys=K)
    busy = core.Load(jobs_per_s=0.01, vcores=1.0)  # mean work 100 > 0.2 x 60 / 0.8 = 15
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, load=busy)
    assert (d.action, d.cpus) == ("admit", 4)
    assert "80% of its history fits" in d.reason and d.finish_s == pytest.approx(12.0)
    # arrivals whose mean work is 10: a miss would waste six of them, not worth a 0.8 chance,
    # and more capacity cannot raise it: refused at once
    small = core.Load(jobs_per_s=0.1, vcores=1.0)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, load=small)
    assert d.action == "drop"
    # the price is the operator's: ten times dearer waste, and the same chance is not enough
    dear = core.PromiseParams(waste_price=10.0)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, dear, load=busy)
    assert d.action == "drop"
    # with 2 vcores free no run of its history fits two waves in 15 s: it waits for 4
    (d,) = core.admit([job], [], 2, 8, 0.0, est, P, load=busy)
    assert d.action == "queue" and d.latest_start_s == pytest.approx(5.0)
    # once even its smallest run (40 in one wave: start by 5 s) cannot finish: dropped
    (d,) = core.admit([job], [], 8, 8, 6.0, est, P, load=busy)
    assert d.action == "drop"


def test_a_job_that_only_early_ends_could_save_is_tried_on_even_odds_or_better() -> None:
    # task seconds 10, 11, 12, 13, 20: bound 20 s a task, central 12 s. The 4-task job fits the
    # 8-vcore cluster in one 20 s wave by its 30 s deadline, but 6 vcores are held by a 6-task
    # job of the same history and only 2 are free: it must start on 4 by 10 s.
    est = _four_task_runs(10, 11, 12, 13, 20)
    busy = core.Load(jobs_per_s=0.01, vcores=1.0)
    job = core.WaitingJob("w", tasks=4, deadline_s=30.0, submitted_s=0.0, keys=K)
    # the running job started 5 s ago: its central end (7 s) would leave a start, its bounded
    # end (15 s) would not; the job waits for the running job to end early
    early = core.RunningJob("r", 6, 100.0, -5.0, -5.0, 6, K)
    (d,) = core.admit([job], [early], 2, 8, 0.0, est, P, load=busy)
    assert d.action == "queue" and "running jobs to end before their bounds" in d.reason
    # started now, even its central end (12 s) is too late: waiting is a poor bet, and on the 2
    # free vcores (two waves) four of five runs fit 30 s
    now = core.RunningJob("r", 6, 100.0, 0.0, 0.0, 6, K)
    (d,) = core.admit([job], [now], 2, 8, 0.0, est, P, load=busy)
    assert (d.action, d.cpus) == ("admit", 2) and "80% of its history fits" in d.reason
    assert d.reason.startswith("tried on 2 vcores (running jobs end too late;")
    assert d.finish_s == pytest.approx(24.0)  # two central 12 s waves
    # by a 22 s deadline two of five fit two waves: worse than even odds, so it waits
    tight = dataclasses.replace(job, deadline_s=22.0)
    (d,) = core.admit([tight], [now], 2, 8, 0.0, est, P, load=busy)
    assert (
        d.action == "queue"
        and d.waits_for == "vcores free enough to try it (running jobs end too late)"
    )
    assert d.latest_start_s == pytest.approx(12.0)  # its fastest run: one 10 s wave on 4


def test_a_try_gets_the_smallest_grant_that_keeps_its_chance() -> None:
    # task seconds 5, 6, 7, 8, 20: the bound (one 20 s wave) misses a 19 s deadline; on 4
    # vcores four of five runs fit, and the largest of those (8 s tasks) fits two waves on 2
    est = _four_task_runs(5, 6, 7, 8, 20)
    job = core.WaitingJob("mid", tasks=4, deadline_s=19.0, submitted_s=0.0, keys=K)
    busy = core.Load(jobs_per_s=0.01, vcores=1.0)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, load=busy)
    assert (d.action, d.cpus) == ("admit", 2) and d.reason.startswith("tried on 2 vcores")
    assert "80% of its history fits" in d.reason


def test_a_job_whose_progress_shows_it_will_miss_is_killed_before_its_deadline() -> None:
    est = taught(0.5, keys=K)
    # one wave (4 tasks on 4 vcores): its tasks' durations show a miss only at its deadline;
    # its progress, 10 % at 20 s and 20 % at 30 s, ends it at 110 s, after its deadline at 100 s
    end = progress_end(0.1, 20.0, 0.2, 30.0)
    assert end == pytest.approx(110.0)
    slow = core.RunningJob("slow", 4, 100.0, 0.0, 0.0, 4, K, progress_end_s=end)
    # 10 % to 40 %: it ends at 50 s
    ok = core.RunningJob(
        "ok", 4, 100.0, 0.0, 0.0, 4, K, progress_end_s=progress_end(0.1, 20.0, 0.4, 30.0)
    )
    # progress that did not rise projects nothing
    stalled = core.RunningJob(
        "stalled", 4, 100.0, 0.0, 0.0, 4, K, progress_end_s=progress_end(0.2, 20.0, 0.2, 30.0)
    )
    seen = dataclasses.replace(P, progress_s=20.0)
    out = {d.job_id: d for d in core.admit([], [slow, ok, stalled], 0, 12, 30.0, est, seen)}
    assert out["slow"].action == "kill" and out["slow"].cpus == 4
    assert "its progress ends it at now+80.0s, after its deadline now+70.0s" in out["slow"].reason
    assert "ok" not in out and "stalled" not in out
    # a rate read in a run's first progress_s is not acted on
    early = dataclasses.replace(seen, progress_s=40.0)
    assert core.admit([], [slow], 0, 12, 30.0, est, early) == []


def test_a_timed_try_is_priced_at_its_progress_verdict() -> None:
    # The job below at mean work 4 is refused when its miss burns its grant until its first
    # wave's verdict (2 vcores x 9.5 s); where its progress shows a miss 2 s after its start,
    # a miss burns 2 vcores x 2 s: 0.8 x 4 = 3.2 beats 0.2 x 4 = 0.8, and it is tried
    est = _four_task_runs(5, 6, 7, 8, 20)
    job = core.WaitingJob("mid", tasks=4, deadline_s=19.0, submitted_s=0.0, keys=K)
    load = core.Load(jobs_per_s=0.5, vcores=2.0)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, load=load)
    assert d.action == "drop"
    seen = dataclasses.replace(P, progress_s=2.0)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, seen, load=load)
    assert d.action == "admit" and d.reason.startswith("tried on")
    # a job whose progress is not read (live: a run without task_containers) shows a miss
    # only at its deadline, as before
    (d,) = core.admit([dataclasses.replace(job, timed=False)], [], 8, 8, 0.0, est, seen, load=load)
    assert d.action == "drop"


def test_a_try_of_several_waves_is_priced_at_its_first_waves_verdict() -> None:
    # The same history and deadline: tried on 2 vcores (two waves, 80 % of its history fits).
    # A miss shows in its first wave, whose tasks run past 19 / 2 s; the kill rule ends it
    # there, so it wastes 2 vcores x 9.5 s = 19, not its grant until the deadline (38).
    est = _four_task_runs(5, 6, 7, 8, 20)
    job = core.WaitingJob("mid", tasks=4, deadline_s=19.0, submitted_s=0.0, keys=K)
    # arrivals' mean work 6: 0.8 x 6 = 4.8 beats 0.2 x 19 = 3.8 (though not 0.2 x 38 = 7.6)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, load=core.Load(jobs_per_s=0.5, vcores=3.0))
    assert (d.action, d.cpus) == ("admit", 2) and d.reason.startswith("tried on 2 vcores")
    run = core.RunningJob("mid", 4, 19.0, 0.0, 0.0, 2, K)
    assert core.first_wave_verdict_s(run) == pytest.approx(9.5)
    # mean work 4: 3.2 does not beat 3.8, and no grant raises its chance: refused
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, load=core.Load(jobs_per_s=0.5, vcores=2.0))
    assert d.action == "drop"
    # a job whose first wave is not timed (live: a run without task_containers) is killed only
    # at its deadline: its miss burns the whole 38, and at mean work 6 it is not worth it
    untimed = dataclasses.replace(job, timed=False)
    load = core.Load(jobs_per_s=0.5, vcores=3.0)
    (d,) = core.admit([untimed], [], 8, 8, 0.0, est, P, load=load)
    assert d.action == "drop"


def test_a_small_job_of_an_unknown_signature_is_explored_when_others_history_refuses_it() -> None:
    # Three runs of another signature each needed 1.3 x (deadline x tasks): the only history
    # a new signature can borrow (the cluster's ratios) says no job can meet its deadline.
    est = taught(1.3, keys=OTHER)
    new = Keys("new", "someone", "elsewhere")
    one = core.WaitingJob("one", tasks=1, deadline_s=60.0, submitted_s=0.0, keys=new)
    two = core.WaitingJob("two", tasks=2, deadline_s=60.0, submitted_s=0.0, keys=new)
    out = {d.job_id: d for d in core.admit([one, two], [], 4, 4, 0.0, est, P)}
    # refusing it would refuse every new signature for good: nothing would run to teach them
    assert (out["one"].action, out["one"].cpus) == ("admit", 1)
    assert out["one"].reason.startswith("explored on 1 vcores")
    assert out["one"].finish_s == pytest.approx(78.0)  # its central estimate: 1.3 x 60 s
    assert out["two"].action == "drop"  # larger than learn_cpus: its bound decides
    busy = core.Load(jobs_per_s=0.01, vcores=1.0)
    (d,) = core.admit([one], [], 4, 4, 0.0, est, P, load=busy)
    assert d.action == "admit"  # with an arrival rate too (no chance of its own to price)
    # only at its first round: with no vcore free then, it gets its bound's answer at once
    (d,) = core.admit([one], [], 0, 4, 0.0, est, P)
    assert d.action == "drop" and d.reason.startswith("cannot finish by its deadline")
    assert d.earliest_finish_s == pytest.approx(78.0)
    # after a wait it has less than its deadline, and what it borrows already says it misses:
    # not started to run late (the kill rule would keep it, small and still learning)
    (d,) = core.admit([one], [], 4, 4, 5.0, est, P)
    assert d.action == "drop"
    # the live sidecar's first round comes a moment after the submission
    live = dataclasses.replace(one, first_round=True)
    (d,) = core.admit([live], [], 4, 4, 2.0, est, P)
    assert (d.action, d.cpus) == ("admit", 1) and d.reason.startswith("explored on 1 vcores")
    # once its signature has the runs the estimator needs, its own history decides
    for _ in range(3):
        est.learn(Outcome(new, tasks=1, work=78.0, deadline_s=60.0, max_cpus=1))
    (d,) = core.admit([one], [], 4, 4, 0.0, est, P)
    assert d.action == "drop"
    # learn_cpus 0 turns exploring off, as it does trying
    off = core.PromiseParams(learn_cpus=0)
    (d,) = core.admit([one], [], 4, 4, 0.0, taught(1.3, keys=OTHER), off)
    assert d.action == "drop"


def test_a_promised_job_gets_idle_vcores_where_its_history_has_longer_runs() -> None:
    # 19 runs of 10 s tasks and one of 20 s: the bound (0.95, nearest rank of 20) is 10 s, so
    # 2 vcores (two waves) meet a 25 s deadline, and 19 of the 20 runs fit them; on 4 (one
    # wave) all 20 do. The larger grant costs no work, only vcores for a shorter time.
    est = _four_task_runs(*([10.0] * 19), 20.0)
    job = core.WaitingJob("a", tasks=4, deadline_s=25.0, submitted_s=0.0, keys=K)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P)
    assert (d.action, d.cpus) == ("admit", 2)  # no arrival rate: nothing prices a top-up
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, core.LoadMeter().load(0.0))
    assert (d.action, d.cpus) == ("admit", 2)  # nor a meter that has seen no arrival
    calm = core.Load(jobs_per_s=0.001, vcores=1.0)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, calm)
    assert (d.action, d.cpus, d.finish_s) == ("admit", 4, 10.0)
    assert d.reason.endswith(
        "2 more than its bound needs (20 of its 20 history runs fit it, 19 fit 2)"
    )
    # arrivals needing 3 vcores at 0.05 a second: on 4 of 6 free, a third of them find no
    # room for its 10 s, 0.17 jobs lost against a chance 1/21 higher
    busy = core.Load(jobs_per_s=0.05, vcores=3.0)
    (d,) = core.admit([job], [], 6, 6, 0.0, est, P, busy)
    assert (d.action, d.cpus) == ("admit", 2)
    # a history with no run above the bound gives it nothing more
    (d,) = core.admit([job], [], 8, 8, 0.0, _four_task_runs(*([10.0] * 20)), P, calm)
    assert (d.action, d.cpus) == ("admit", 2)


def test_a_bound_from_few_runs_takes_idle_vcores_no_arrival_needs() -> None:
    # 5 runs of 10 s tasks: fewer than the 19 a 0.95 quantile needs, so the bound is their
    # largest, 10 s, which a sixth run exceeds one time in six. 2 vcores (two waves) meet a 25 s
    # deadline and every run fits them, as every run fits 4 (one wave), but a run longer than
    # all five has 12.5 s a task on 2 and 25 s on 4: where no arrival, of any size, is expected
    # to be turned away by the other 2, the job takes them.
    est = _four_task_runs(*([10.0] * 5))
    job = core.WaitingJob("a", tasks=4, deadline_s=25.0, submitted_s=0.0, keys=K)
    calm = core.Load(jobs_per_s=0.001, vcores=1.0)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, calm)
    assert (d.action, d.cpus, d.finish_s) == ("admit", 4, 10.0)
    assert d.reason.endswith(
        "2 more than its bound needs (its bound is the largest of its 5 runs, and no arrival is "
        "expected to need the rest)"
    )
    # arrivals needing 3 vcores at 0.05 a second find 2 of 6 free beside 4, 4 beside 2: it
    # keeps the 2 its bound needs
    busy = core.Load(jobs_per_s=0.05, vcores=3.0)
    (d,) = core.admit([job], [], 6, 6, 0.0, est, P, busy)
    assert (d.action, d.cpus) == ("admit", 2)
    # none without an arrival rate, as for any top-up
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P)
    assert (d.action, d.cpus) == ("admit", 2)
    # 20 runs make the bound a 0.95 quantile (the 19th): nothing beyond its history is priced
    (d,) = core.admit([job], [], 8, 8, 0.0, _four_task_runs(*([10.0] * 20)), P, calm)
    assert (d.action, d.cpus) == ("admit", 2)


def test_no_top_up_while_a_waiting_job_counts_on_the_free_vcores() -> None:
    est = _four_task_runs(*([10.0] * 19), 20.0)
    calm = core.Load(jobs_per_s=0.001, vcores=1.0)
    job = core.WaitingJob("a", tasks=4, deadline_s=25.0, submitted_s=0.0, keys=K)
    # 4 of 10 vcores are held until 10 s; "big" (16 tasks by 35 s) needs 8 vcores from then
    running = core.RunningJob("r", 4, 100.0, 0.0, 0.0, 4, K)
    big = core.WaitingJob("big", tasks=16, deadline_s=35.0, submitted_s=0.0, keys=K)
    out = {d.job_id: d for d in core.admit([job, big], [running], 6, 10, 0.0, est, P, calm)}
    assert (out["a"].action, out["a"].cpus) == ("admit", 2)
    assert (out["big"].action, out["big"].start_s) == ("queue", 10.0)
    (d,) = core.admit([job], [running], 6, 10, 0.0, est, P, calm)
    assert (d.action, d.cpus) == ("admit", 4)


def _jockey_runs() -> Estimator:
    """60 runs of 2 tasks: 9, 10 or 11 s a task, deadlines of 1.11 or 2.22 times the run
    (ratios 0.9 and 0.45): the tighter of both bounds bounds the signature."""
    est = Estimator()
    for i in range(60):
        task_s, ratio = (9.0, 10.0, 11.0)[i % 3], (0.9, 0.45)[i % 2]
        est.learn(Outcome(K, tasks=2, work=2 * task_s, deadline_s=task_s / ratio, max_cpus=2))
    return est


def test_a_try_on_the_tighter_bound_takes_the_odds_of_the_less_hopeful_predictor() -> None:
    # 60 runs of 2 tasks: 9, 10 or 11 s a task, deadlines of 1.11 or 2.22 times the run
    # (ratios 0.9 and 0.45: tight runs due 10 to 12.2 s, loose ones 20 to 24.4 s). A job due
    # 15 s after its submission falls between them: the runs due nearest it are of both kinds,
    # so its ratios bound it at 0.9 x 15 s x 2 = 27, and the tighter of both bounds (each at
    # the 0.975 quantile) is the task seconds', 22. At 5 s only 10 s are left, 20 on 2 vcores,
    # and the bound misses.
    est = _jockey_runs()
    job = core.WaitingJob("j", tasks=2, deadline_s=15.0, submitted_s=0.0, keys=K)
    assert est.estimate(K, 2, 15.0, 2).upper == pytest.approx(22.0)
    # Its task seconds alone fit 20 in 40 of 60 runs; its ratios near 15 s predict 13.5 or 27.
    # The try is priced on the larger of both predictions at each rank: 28 of 60 fit. A miss
    # wastes 20 vcore-seconds, so it is worth its chance where an arrival's mean work is above
    # 20 x 32 / 28 = 22.9, not merely above 20 x 20 / 40 = 10.
    hopeful = est.works(K, 2, 15.0, 2)
    assert sum(w <= 20.0 for w in hopeful) / len(hopeful) == pytest.approx(2 / 3)
    cautious = est.works(K, 2, 15.0, 2, cautious=True)
    assert sum(w <= 20.0 for w in cautious) / len(cautious) == pytest.approx(28 / 60)
    mean_20 = core.Load(jobs_per_s=0.05, vcores=1.0)
    (d,) = core.admit([job], [], 8, 8, 5.0, est, P, load=mean_20)
    assert d.action == "drop"
    mean_25 = core.Load(jobs_per_s=0.04, vcores=1.0)
    (d,) = core.admit([job], [], 8, 8, 5.0, est, P, load=mean_25)
    assert (d.action, d.cpus) == ("admit", 2) and "47% of its history fits" in d.reason


def test_a_job_waiting_for_its_promise_is_never_queued_past_its_latest_start() -> None:
    # Due in 8 s, the job is bounded by its ratios (0.9 x 8 s x 2 = 14.4: 7.2 s on its 2
    # vcores, so it must start by 0.8 s), while its task seconds never predict less than 18.
    # A try's latest start by the less hopeful predictor is already past (8 - 18 / 2 = -1 s),
    # but its promise may still be kept until 0.8 s: queued behind a running job that ends too
    # late even at its central estimate, it waits until then. A latest start in the past
    # would ask for a round at once, again and again, and never drop it.
    est = _jockey_runs()
    job = core.WaitingJob("j", tasks=2, deadline_s=8.0, submitted_s=0.0, keys=K)
    assert est.estimate(K, 2, 8.0, 2).upper == pytest.approx(14.4)
    assert est.works(K, 2, 8.0, 2, cautious=True)[0] == pytest.approx(18.0)
    running = core.RunningJob("r", 2, 100.0, 0.0, 0.0, 2, OTHER)
    load = core.Load(jobs_per_s=0.025, vcores=1.0)
    (d,) = core.admit([job], [running], 0, 2, 0.0, est, P, load=load)
    assert d.action == "queue" and d.latest_start_s == pytest.approx(0.8)
    # once that passes, its bound misses and no run of the less hopeful predictor fits: refused
    (d,) = core.admit([job], [running], 0, 2, 0.9, est, P, load=load)
    assert d.action == "drop"


def test_a_promise_after_a_wait_is_priced_at_the_chance_the_wait_left_it() -> None:
    # 64 runs of 4 tasks: 60 of 10 s a task, one of 11 s, three of 13 s (works 40, 44, 52).
    # The bound (the 61st smallest) is one 11 s wave on 4 vcores; a 15 s deadline allowed up to
    # 60 from submission, where the last of the 65 gaps ends.
    est = _four_task_runs(*([10.0] * 60 + [11.0] + [13.0] * 3))
    job = core.WaitingJob("j", tasks=4, deadline_s=15.0, submitted_s=0.0, keys=K)
    poor = core.Load(jobs_per_s=1.0, vcores=2.0)  # arrivals' mean work 2
    # At its first round it is promised on its bound, unpriced.
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, poor)
    assert (d.action, d.cpus) == ("admit", 4)
    # Having waited 1 s, 56 fits: every run and half the last gap, 64.5 / 65. A miss wastes
    # 4 x 14 = 56, worth it where the mean work exceeds 56 x 0.5 / 64.5 = 0.43.
    (d,) = core.admit([job], [], 8, 8, 1.0, est, P, poor)
    assert (d.action, d.cpus) == ("admit", 4)
    # Having waited 3 s, 48 fits: 61 runs and half the gap from 44 to 52, 61.5 / 65. A miss
    # wastes 4 x 12 = 48, worth it only where the mean work exceeds 48 x 3.5 / 61.5 = 2.73.
    (d,) = core.admit([job], [], 8, 8, 3.0, est, P, poor)
    assert d.action == "queue" and "its wait left it a chance of 0.946 by its 64 runs" in d.reason
    (d,) = core.admit([job], [], 8, 8, 3.0, est, P, core.Load(jobs_per_s=0.25, vcores=1.0))
    assert (d.action, d.cpus) == ("admit", 4)  # mean work 4
    # A round that is the job's first, 3 s after its submission (the live sidecar's submission
    # round), promises it on its bound.
    first = dataclasses.replace(job, first_round=True)
    (d,) = core.admit([first], [], 8, 8, 3.0, est, P, poor)
    assert (d.action, d.cpus) == ("admit", 4)
    # Without an arrival rate there is no price.
    (d,) = core.admit([job], [], 8, 8, 3.0, est, P)
    assert (d.action, d.cpus) == ("admit", 4)


def test_a_round_never_books_more_than_is_free() -> None:
    """Over random rounds (histories with killed runs, waiting and running jobs, AM containers,
    arrival loads, both work models): what a round admits, with each admitted job's AM
    containers, fits in what was free plus what its kills free, and every job gets one
    decision. The live sidecar books exactly this, so YARN is never asked for more than the
    deadline queue holds."""
    rng = np.random.default_rng(7)
    keys = [Keys(f"sig{i}", f"ut{i % 2}", "q") for i in range(4)]
    admitted_any = filled = 0
    for _ in range(400):
        est = Estimator(EstimatorParams(min_samples=int(rng.integers(1, 4))))
        for _ in range(int(rng.integers(0, 30))):
            tasks = int(rng.integers(1, 40))
            est.learn(
                Outcome(
                    keys[int(rng.integers(0, 4))],
                    tasks=tasks,
                    work=float(rng.uniform(1, 60)) * tasks,
                    deadline_s=float(rng.uniform(20, 600)),
                    max_cpus=max(1, min(tasks, 32)),
                    censored=bool(rng.random() < 0.2),
                )
            )
        capacity = int(rng.integers(2, 48))
        am = int(rng.integers(0, 3))
        params = core.PromiseParams(am_containers=am, divisible=bool(rng.random() < 0.5))
        now = 1000.0
        running = []
        booked = 0
        for i in range(int(rng.integers(0, 6))):
            cpus = int(rng.integers(1, 6))
            if booked + cpus + am > capacity:
                break
            booked += cpus + am
            submitted = now - float(rng.uniform(0, 300))
            running.append(
                core.RunningJob(
                    f"r{i}",
                    tasks=int(rng.integers(1, 30)),
                    deadline_s=float(rng.uniform(10, 600)),
                    submitted_s=submitted,
                    started_s=submitted + float(rng.uniform(0, now - submitted)),
                    cpus=cpus,
                    keys=keys[int(rng.integers(0, 4))],
                    task_floor_s=float(rng.choice([0.0, rng.uniform(1, 50)])),
                )
            )
        waiting = [
            core.WaitingJob(
                f"w{i}",
                tasks=int(rng.integers(1, 40)),
                deadline_s=float(rng.uniform(5, 900)),
                submitted_s=now - float(rng.uniform(0, 30)),
                keys=keys[int(rng.integers(0, 4))],
                first_round=bool(rng.random() < 0.5),
                timed=bool(rng.random() < 0.8),
            )
            for i in range(int(rng.integers(0, 12)))
        ]
        load = None
        if rng.random() < 0.7:
            n = int(rng.integers(1, 20))
            load = core.Load(
                jobs_per_s=float(rng.uniform(0.001, 0.1)),
                vcores=float(rng.uniform(0.1, capacity)),
                slack=loss.Slack.of(rng.uniform(0, 300, n).tolist()),
                sizes=loss.Sizes.of(
                    rng.uniform(1, 500, n).tolist(), rng.integers(1, 8, n).tolist()
                ),
            )
        free = int(rng.integers(0, capacity - booked + 1))
        decisions = core.admit(waiting, running, free, capacity, now, est, params, load)
        freed = sum(d.cpus for d in decisions if d.action == "kill")
        taken = sum(d.cpus + am for d in decisions if d.action == "admit")
        assert taken <= free + freed, (free, freed, decisions)
        decided = [d.job_id for d in decisions if d.job_id.startswith("w")]
        assert sorted(decided) == sorted(j.id for j in waiting)
        admitted_any += taken > 0
        filled += any(d.action == "admit" and d.cpus + am == free + freed for d in decisions)
    # the rounds reached the bound: many admitted, and some took exactly what was free
    assert admitted_any > 100 and filled > 10, (admitted_any, filled)


def test_a_try_whose_widest_chance_crowds_out_too_much_is_tried_on_a_narrower_grant() -> None:
    # task seconds 4, 5, 9, 10, 30 (works 16, 20, 36, 40, 120): the bound (one 30 s wave) misses
    # a 10 s deadline. On 4 vcores (one wave) four of five runs fit, 0.8; on 2 (two waves) the
    # two with tasks of 5 s or less, 0.4. The central estimate (9 s a task) holds 4 vcores for
    # 9 s, 2 for 18 s.
    est = _four_task_runs(4, 5, 9, 10, 30)
    job = core.WaitingJob("w", tasks=4, deadline_s=10.0, submitted_s=0.0, keys=K)
    # Arrivals need 4 vcores at 0.2 a second (mean work 20). Both grants are worth their miss:
    # on 4 a miss wastes 4 x 10 s = 40, and 0.8 x 20 = 16 beats 0.2 x 40 = 8; on 2 the first
    # wave's verdict (5 s) ends it, wasting 2 x 5 s = 10, and 0.4 x 20 = 8 beats 0.6 x 10 = 6.
    load = core.Load(jobs_per_s=0.2, vcores=4.0)
    # With 6 free, 4 for it leave the arrivals 2 of their 4 for 9 s: 0.2 x 9 s x 2/4 = 0.9
    # crowded out, not worth a 0.8 chance; 2 for it leave them all 4, and nobody is lost.
    assert loss.crowded_out(load, 6, [], 0.0, 4, 9.0, 36.0, 6) == pytest.approx(0.9)
    assert loss.crowded_out(load, 6, [], 0.0, 2, 18.0, 36.0, 6) == 0.0
    # Waiting for room for the wider grant would give up the narrower one's chance for nothing.
    (d,) = core.admit([job], [], 6, 6, 0.0, est, P, load=load)
    assert (d.action, d.cpus) == ("admit", 2) and d.reason.startswith("tried on 2 vcores")
    assert "40% of its history fits" in d.reason
    assert d.finish_s == pytest.approx(18.0)  # two central 9 s waves
    # With 8 free the wider grant crowds out nobody either: its larger chance wins.
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, load=load)
    assert (d.action, d.cpus) == ("admit", 4) and "80% of its history fits" in d.reason


def test_a_try_takes_the_grant_whose_chance_less_its_crowd_out_is_largest() -> None:
    # The history, deadline and 6 free vcores above: 4 vcores (chance 0.8) leave arrivals
    # needing 4 vcores 2 short for 9 s, 2 vcores (chance 0.4) crowd out nobody.
    est = _four_task_runs(4, 5, 9, 10, 30)
    job = core.WaitingJob("w", tasks=4, deadline_s=10.0, submitted_s=0.0, keys=K)
    # At 0.1 a second the wider grant crowds out 0.1 x 9 s x 2/4 = 0.45, fewer than its chance,
    # but it is then worth 0.8 - 0.45 = 0.35 met deadlines, the narrower one 0.4.
    (d,) = core.admit([job], [], 6, 6, 0.0, est, P, load=core.Load(jobs_per_s=0.1, vcores=4.0))
    assert (d.action, d.cpus) == ("admit", 2) and "40% of its history fits" in d.reason
    # At 0.05 a second it crowds out 0.225 and is worth 0.575: the wider grant.
    (d,) = core.admit([job], [], 6, 6, 0.0, est, P, load=core.Load(jobs_per_s=0.05, vcores=4.0))
    assert (d.action, d.cpus) == ("admit", 4) and "80% of its history fits" in d.reason


def test_a_running_job_past_its_central_end_releases_at_its_bound_or_its_progress() -> None:
    est = taught(0.5, runs=19)  # a: 2 waves of 50 s on 2 vcores
    for i in range(19):  # r's signature: 18 runs used 0.1 of their window, one 0.5
        ratio = 0.5 if i == 0 else 0.1
        est.learn(Outcome(OTHER, tasks=10, work=ratio * 2000.0, deadline_s=200.0, max_cpus=10))
    busy = core.Load(jobs_per_s=0.1, vcores=9.0)
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=50.0, keys=K)
    # r is bounded to end at 200 s and centred at 20 s (its ratios, over a 400 s window). At
    # 10 s it is expected at 20 s, so the arrivals beside a's hold find its 10 vcores 10 s on.
    young = core.RunningJob("r", 10, 400.0, 0.0, 0.0, 10, OTHER, task_floor_s=10.0)
    early = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=10.0, keys=K)
    (d,) = core.admit([early], [young], 10, 20, 10.0, est, P, busy)
    assert (d.action, d.cpus) == ("admit", 2)
    # At 50 s its tasks have run 50 s without ending, past its centre: it is expected at its
    # bound, 200 s (not at once), so for all of a's 100 s hold the arrivals find 8 vcores where
    # they need 9.
    old = core.RunningJob("r", 10, 400.0, 0.0, 0.0, 10, OTHER, task_floor_s=50.0)
    (d,) = core.admit([job], [old], 10, 20, 50.0, est, P, busy)
    assert d.action == "queue" and "crowd out about 1.1" in d.reason
    # Its progress says it ends at 60 s: the arrivals find its vcores then, and a is admitted
    seen = dataclasses.replace(old, progress_end_s=60.0)
    (d,) = core.admit([job], [seen], 10, 20, 50.0, est, P, busy)
    assert (d.action, d.cpus) == ("admit", 2)
