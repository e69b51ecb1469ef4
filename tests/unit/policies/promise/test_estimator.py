"""Promise's per-signature estimator (``app/policies/promise/estimator.py``) by hand."""

from __future__ import annotations

import math
import random

import pytest

from app.policies.base import PolicyError
from app.policies.promise import estimator as estimator_module
from app.policies.promise.estimator import (
    Estimator,
    EstimatorParams,
    Outcome,
    censored_quantile,
    quantile,
    rebuild,
)
from app.policies.promise.signature import Keys

A = Keys("sigA", "u1|t", "q")
B = Keys("sigB", "u1|t", "q")
C = Keys("sigC", "u2|t", "q")


def _o(keys: Keys, work: float, tasks: int = 2, deadline: float = 100.0) -> Outcome:
    return Outcome(keys, tasks, work, deadline, max_cpus=tasks)


def test_nearest_rank_quantile() -> None:
    assert quantile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.95) == 4.0
    assert quantile([5.0], 0.95) == 5.0
    with pytest.raises(PolicyError):
        quantile([], 0.5)


def test_censored_quantile_is_the_product_limit_quantile() -> None:
    # without lower bounds it is the nearest-rank quantile
    rng = random.Random(3)
    for _ in range(200):
        values = [rng.choice((1.0, 2.0, 3.0, rng.random())) for _ in range(rng.randint(1, 30))]
        q = rng.choice((0.5, 0.75, 0.9, 0.95, 1.0))
        assert censored_quantile(values, [False] * len(values), q) == quantile(values, q)
    # 1, 2 and 3 ended, one run was killed after 2.5: at 2 half the runs have ended (1/4, then
    # 1/3 of the 3 still at risk); the killed one leaves the risk set, its share passing to 3
    values, cut = [1.0, 2.0, 2.5, 3.0], [False, False, True, False]
    assert censored_quantile(values, cut, 0.5) == 2.0
    assert censored_quantile(values, cut, 0.75) == 3.0
    # a lower bound below an ended run does not make that run any rarer than its rank says
    assert censored_quantile([0.5, 1.0, 2.0], [True, False, False], 0.5) == 1.0
    # killed after the largest ended run: a third of the runs are known to be larger than
    # every ended one, so no sample bounds them with a coverage above 2/3
    assert censored_quantile([1.0, 2.0, 3.0], [False, False, True], 2 / 3) == 2.0
    assert censored_quantile([1.0, 2.0, 3.0], [False, False, True], 0.75) is None
    # a run killed at the value another ended at was at risk there: it is counted among them
    assert censored_quantile([2.0, 2.0], [False, True], 0.5) == 2.0
    with pytest.raises(PolicyError):
        censored_quantile([], [], 0.5)


def test_killed_runs_keep_a_signatures_bound_from_forgetting_its_largest_runs() -> None:
    # Four tasks of 10 s (40 vcore-seconds) every run. Loose deadlines (20 s on 4 vcores,
    # ratio 0.5) alternate with tight ones (10 s, ratio 1). A tight run promised on the loose
    # runs' ratio gets 2 vcores and is killed at its first wave, before it ends: if only the
    # runs that ended were learned, the ratios would all be 0.5 and every tight run would be
    # promised the same too-small grant and killed again. Learned as lower bounds (killed
    # after 5 s on each task, 20 vcore-seconds shown: ratio at least 0.5), the runs that are
    # known to be larger than every ended one leave the ratio without a bound, and the task
    # seconds (exact here) bound the job.
    est = Estimator(EstimatorParams(min_samples=3, quantile=0.75))
    for _ in range(3):
        est.learn(Outcome(A, 4, 40.0, 20.0, max_cpus=4))
    tight = est.estimate(A, tasks=4, deadline_s=10.0, max_cpus=4)
    assert tight.source == "ratio@sigA" and tight.upper == pytest.approx(20.0)
    est.learn(Outcome(A, 4, 20.0, 10.0, max_cpus=4, censored=True))
    # one of four known larger: a 0.75 quantile is still the ended runs' 0.5
    assert est.estimate(A, 4, 10.0, 4).upper == pytest.approx(20.0)
    est.learn(Outcome(A, 4, 20.0, 10.0, max_cpus=4, censored=True))
    tight = est.estimate(A, tasks=4, deadline_s=10.0, max_cpus=4)
    assert tight.source == "task_s@sigA" and tight.upper == pytest.approx(40.0)
    # a try's chances never count on a run that did not end
    assert est.works(A, 4, 10.0, 4) == pytest.approx([40.0, 40.0, 40.0, math.inf, math.inf])
    assert est.entries()["sigA"]["samples"] == 5


def test_bootstrap_is_the_whole_deadline_at_full_parallelism() -> None:
    e = Estimator().estimate(A, tasks=8, deadline_s=50.0, max_cpus=4)
    assert (e.upper, e.source) == (200.0, "bootstrap")
    # after the start-up bound: still just feasible from submission, as the thesis assumes
    e = Estimator(EstimatorParams(startup_s=10.0)).estimate(A, 8, 50.0, 4)
    assert (e.upper, e.overhead_s, e.source) == (160.0, 10.0, "bootstrap")
    e = Estimator(EstimatorParams(startup_s=60.0)).estimate(A, 8, 50.0, 4)
    assert e.upper == 200.0  # no time left after its start-up: infeasible, not free


def test_ratio_bound_comes_from_the_most_specific_key_with_enough_runs() -> None:
    # a 0.75 quantile is one of 3 samples (3 >= 0.75 / 0.25)
    est = Estimator(EstimatorParams(min_samples=3, quantile=0.75))
    for work in (20.0, 40.0, 100.0):  # ratios work / (100 * 2): 0.1, 0.2, 0.5
        est.learn(_o(A, work))
    e = est.estimate(A, tasks=2, deadline_s=100.0, max_cpus=2)
    assert e.source == "ratio@sigA" and e.upper == pytest.approx(100.0)  # 0.5 * 100 * 2
    assert e.point == pytest.approx(40.0)  # median ratio 0.2
    # B has no runs: falls back to the user+type key (same three runs)
    assert est.estimate(B, 2, 100.0, 2).source == "ratio@u1|t"
    # C shares only the queue
    assert est.estimate(C, 2, 100.0, 2).source == "ratio@q"


def test_a_ratio_key_answers_only_with_enough_runs_for_its_quantile() -> None:
    # 0.95 needs 19 runs: below that the largest of n ratios is exceeded by a new run with
    # probability 1 / (n + 1), so the next key with enough runs answers. Every run here has
    # ratio 0.1 on 1, 2 or 4 of its 4 tasks' vcores, so task seconds scatter and ratios win.
    def run(keys: Keys, i: int) -> Outcome:
        cpus = (1, 2, 4)[i % 3]
        return Outcome(keys, 4, 0.1 * 100.0 * cpus, 100.0, max_cpus=cpus)

    est = Estimator(EstimatorParams(min_samples=3, quantile=0.95))
    for i in range(30):
        est.learn(run(B, i))
    for i in range(18):
        est.learn(run(A, i))
    assert est.estimate(A, tasks=4, deadline_s=100.0, max_cpus=4).source == "ratio@u1|t"
    est.learn(run(A, 18))  # the 19th
    e = est.estimate(A, tasks=4, deadline_s=100.0, max_cpus=4)
    assert e.source == "ratio@sigA" and e.upper == pytest.approx(40.0)  # 0.1 * 100 * 4
    # a quantile of 1 needs the whole window; the global key answers with any runs
    whole = Estimator(EstimatorParams(min_samples=3, quantile=1.0, window=8))
    for i in range(7):
        whole.learn(run(A, i))
    assert whole.estimate(A, 4, 100.0, 4).source == "ratio@*"
    whole.learn(run(A, 7))
    assert whole.estimate(A, 4, 100.0, 4).source == "ratio@sigA"


def _due(keys: Keys, i: int, ratio: float, killed: bool = False) -> Outcome:
    """Run ``i`` of 4 tasks due ``10 / ratio`` s on 1, 2 or 4 vcores, using ``ratio`` of its
    deadline at that parallelism: its task seconds scatter fourfold, so ratios predict it."""
    cpus = (1, 2, 4)[i % 3]
    deadline = 10.0 / ratio
    return Outcome(keys, 4, ratio * deadline * cpus, deadline, max_cpus=cpus, censored=killed)


def test_a_signatures_ratios_are_those_of_its_runs_due_nearest_the_job() -> None:
    # 60 runs of one signature: nine in ten had loose deadlines (20 s, twice the run, ratio
    # 0.5) and one in ten tight ones (10 s, the run itself, ratio 1). Over the whole window the
    # 0.95 ratio is 1, so every loose job would be bounded as needing its whole deadline at
    # full parallelism; the 19 runs due nearest a loose job's deadline are all loose.
    runs = [_due(A, i, 1.0 if i % 10 == 9 else 0.5) for i in range(60)]
    est = rebuild(runs, EstimatorParams(min_samples=3))
    assert est.entries()["sigA"]["ratio_upper"] == 1.0
    # (on 2 vcores, where the task seconds' bound, 10 s a task, says 40)
    loose = est.estimate(A, tasks=4, deadline_s=20.0, max_cpus=2)
    assert (loose.source, loose.upper) == ("ratio@sigA", pytest.approx(0.5 * 20.0 * 2))
    assert est.works(A, 4, 20.0, 2) == pytest.approx([20.0] * 19)
    # a tight job's 19 nearest runs hold every tight run, so its bound is the tight runs' ratio
    tight = est.estimate(A, tasks=4, deadline_s=10.0, max_cpus=2)
    assert (tight.source, tight.upper) == ("ratio@sigA", pytest.approx(1.0 * 10.0 * 2))
    # the keys below the signature pool other jobs' runs: their ratios are the whole window's
    other = est.estimate(B, 4, 20.0, 2)
    assert (other.source, other.upper) == ("ratio@u1|t", pytest.approx(1.0 * 20.0 * 2))
    # a deadline with no time in it has no runs due near it: the whole window answers
    assert est.estimate(A, 4, 0.0, 2).upper == pytest.approx(0.0)


def test_with_no_more_runs_than_its_quantile_needs_a_signature_takes_all_its_ratios() -> None:
    # 19 runs, what 0.95 needs: the one tight run bounds the loose job too
    est = Estimator(EstimatorParams(min_samples=3))
    for i in range(19):
        est.learn(_due(A, i, 1.0 if i == 0 else 0.5))
    e = est.estimate(A, 4, 20.0, 1)
    assert (e.source, e.upper) == ("ratio@sigA", pytest.approx(1.0 * 20.0 * 1))
    est.learn(_due(A, 19, 0.5))  # the 20th: the 19 due nearest 20 s are loose
    assert est.estimate(A, 4, 20.0, 1).upper == pytest.approx(0.5 * 20.0 * 1)


def test_killed_runs_due_near_a_job_leave_its_signatures_ratios_without_a_bound() -> None:
    # sigA: 30 loose runs that ended (due 20 s, ratio 0.5) and 10 tight ones killed at their
    # deadline of 10 s (ratio at least 0.6). A job due 10 s: 10 of its 19 nearest runs are
    # known to be larger than every one that ended, so its signature's ratios bound nothing,
    # and the next key's, which hold sigB's runs of the same user (ratio 0.7), bound it. A
    # loose job's nearest runs all ended.
    est = Estimator(EstimatorParams(min_samples=3))
    for i in range(30):
        est.learn(_due(B, i, 0.7))
    for i in range(40):
        est.learn(_due(A, i, 0.6, killed=True) if i % 4 == 3 else _due(A, i, 0.5))
    tight = est.estimate(A, tasks=4, deadline_s=10.0, max_cpus=4)
    assert (tight.source, tight.upper) == ("ratio@u1|t", pytest.approx(0.7 * 10.0 * 4))
    loose = est.estimate(A, tasks=4, deadline_s=20.0, max_cpus=4)
    assert (loose.source, loose.upper) == ("ratio@sigA", pytest.approx(0.5 * 20.0 * 4))


def test_task_seconds_win_once_they_predict_a_signature_better() -> None:
    est = Estimator(EstimatorParams(min_samples=2))
    # Same work every run (10 s per task) but deadlines that vary: task seconds are exact,
    # ratios scatter, so after two scored runs each the signature's record picks task seconds.
    for deadline in (40.0, 400.0, 80.0, 200.0, 1000.0):
        est.learn(_o(A, 20.0, deadline=deadline))
    e = est.estimate(A, tasks=2, deadline_s=500.0, max_cpus=2)
    assert e.source == "task_s@sigA" and e.upper == pytest.approx(20.0)
    err = est.error("sigA")
    assert err["predictions"] == 5  # every run after the first had a prediction
    assert est.entries()["sigA"]["task_s_error"] == pytest.approx(0.0)


def test_the_predictor_whose_bound_fits_better_bounds_even_if_its_median_is_worse() -> None:
    # sigA has 18 runs, too few for its own ratios: its user's bound it, pooled with sigB's 40
    # runs, nine in ten due at twice their run (ratio 0.5, as all of sigA's) and the tenth at
    # the run itself. The pooled ratios' median is exact for sigA, but their 0.95 quantile is
    # the tight runs' ratio, a bound of twice its work; its task seconds scatter 20 % around
    # 10 s, a bound at most 1.5 times its work. Admission plans with the bound, so the
    # bound's quantile loss decides it, not the median's error; the central value stays the
    # better median's.
    est = Estimator(EstimatorParams(min_samples=3))
    for i in range(40):
        est.learn(_o(B, 20.0, tasks=2, deadline=10.0 / (1.0 if i % 10 == 9 else 0.5)))
    for i in range(18):
        task_s = (8.0, 10.0, 12.0)[i % 3]
        est.learn(_o(A, 2 * task_s, tasks=2, deadline=2 * task_s))
    entry = est.entries()["sigA"]
    # the median rule would pick the ratios
    assert entry["pooled_ratio_error"] < entry["task_s_error"]
    assert entry["task_s_bound_loss"] < entry["pooled_ratio_bound_loss"]
    e = est.estimate(A, tasks=2, deadline_s=20.0, max_cpus=2)
    assert e.source == "task_s@sigA" and e.upper == pytest.approx(24.0)
    assert e.point == pytest.approx(0.5 * 20.0 * 2)  # the ratios' median on this deadline
    # a central value above the bound is the bound: a deadline of 30 s makes the ratios' 30
    assert est.estimate(A, tasks=2, deadline_s=30.0, max_cpus=2).point == pytest.approx(24.0)


def test_ratios_pooled_from_other_jobs_are_judged_on_their_own_record() -> None:
    # sigA's task seconds scatter 20 % around 10 s and every one of its runs was due at twice
    # its run (ratio 0.5); each ran beside a run of sigB, of the same user, due at its run
    # (ratio 1). Its first 19 runs were bounded by pooled ratios (the cluster's, then their
    # user's), whose 0.95 quantile is sigB's 1: twice their work. From the 20th on its own
    # ratios bound it exactly, 99 runs of them.
    est = Estimator(EstimatorParams(min_samples=3))
    for i in range(118):
        est.learn(_o(B, 20.0, tasks=2, deadline=10.0))
        task_s = (8.0, 10.0, 12.0)[i % 3]
        est.learn(_o(A, 2 * task_s, tasks=2, deadline=2 * task_s))
    entry = est.entries()["sigA"]
    assert entry["ratio_bound_loss"] == pytest.approx(0.0)
    assert entry["pooled_ratio_bound_loss"] == pytest.approx(0.05 * math.log(2.0))
    assert entry["ratio_bound_loss"] < entry["task_s_bound_loss"]
    assert entry["task_s_bound_loss"] < entry["pooled_ratio_bound_loss"]
    loose = est.estimate(A, tasks=2, deadline_s=20.0, max_cpus=2)
    assert (loose.source, loose.upper) == ("ratio@sigA", pytest.approx(0.5 * 20.0 * 2))
    # Then 10 of its runs due at 5 s were killed there (each ratio at least 0.6, above every
    # one that ended). A job due 5 s: those runs are 10 of its 19 nearest, so its own ratios
    # bound nothing and its user's would (1, a bound of 10 that its work, 16 to 24, exceeds).
    # Pooled ratios bounded this signature worse than its task seconds did, whatever its own
    # ratios scored: its task seconds bound it.
    for _ in range(10):
        est.learn(_o(B, 20.0, tasks=2, deadline=10.0))
        est.learn(Outcome(A, 2, 0.6 * 5.0 * 2, 5.0, max_cpus=2, censored=True))
    tight = est.estimate(A, tasks=2, deadline_s=5.0, max_cpus=2)
    assert (tight.source, tight.upper) == ("task_s@sigA", pytest.approx(24.0))


def test_the_tighter_of_both_bounds_bounds_where_it_scored_better() -> None:
    # Task seconds scatter 20 % around 10 s; half the deadlines are the run itself and half
    # twice it. Neither predictor alone is tight for every job: the ratios' bound (1) is the
    # work of a tight job but twice that of a loose one; the task seconds' bound (12 s) is 1.5
    # times the work of an 8 s run. The smaller of the two, each at the 0.975 quantile so that
    # the work exceeds neither with probability 0.95, is the work itself for a tight job and
    # the task seconds' bound for a loose one: its quantile loss is the task seconds' halved.
    est = Estimator(EstimatorParams(min_samples=3))
    for i in range(40):
        task_s = (8.0, 10.0, 12.0)[i % 3]
        ratio = (1.0, 0.5)[i % 2]
        est.learn(_o(A, 2 * task_s, tasks=2, deadline=task_s / ratio))
    entry = est.entries()["sigA"]
    task_loss, ratio_loss = entry["task_s_bound_loss"], entry["ratio_bound_loss"]
    assert entry["tighter_bound_loss"] < min(task_loss, ratio_loss)
    # the tight half of the runs costs it nothing: about half the task seconds' loss
    assert entry["tighter_bound_loss"] < 0.6 * task_loss
    # a tight deadline of 10 s on 2 vcores: the ratios' 20 beats the task seconds' 24
    tight = est.estimate(A, tasks=2, deadline_s=10.0, max_cpus=2)
    assert (tight.source, tight.upper) == ("ratio@sigA", pytest.approx(20.0))
    assert est.works(A, 2, 10.0, 2)[-1] == pytest.approx(20.0)
    # a loose one of 20 s: the 19 runs whose deadlines were nearest 20 s were all loose (16, 20
    # and 24 s for tasks of 8, 10 and 12 s), so its ratios' bound, 0.5, is the work of a 10 s
    # run and below the task seconds' 12 s a task
    loose_est = est.estimate(A, tasks=2, deadline_s=20.0, max_cpus=2)
    assert (loose_est.source, loose_est.upper) == ("ratio@sigA", pytest.approx(20.0))
    assert est.works(A, 2, 20.0, 2) == pytest.approx([20.0] * 19)
    # a deadline between the two kinds: the nearest runs mix them, and the task seconds bound
    mixed = est.estimate(A, tasks=2, deadline_s=14.0, max_cpus=2)
    assert (mixed.source, mixed.upper) == ("task_s@sigA", pytest.approx(24.0))
    # for a try, the larger of both predictions at each rank: below any work, the smaller of
    # the shares the two predictors give (ratios: 20 for the tight job, whose nearest runs were
    # all tight; task seconds: 16, 20, 24)
    runs = sorted(2 * (8.0, 10.0, 12.0)[i % 3] for i in range(40))
    hopeful, cautious = est.works(A, 2, 10.0, 2), est.works(A, 2, 10.0, 2, cautious=True)
    assert hopeful == pytest.approx([20.0] * 19)
    for work in (10.0, 16.0, 20.0, 24.0):
        by_ratio = sum(w <= work for w in hopeful) / len(hopeful)
        by_task = sum(w <= work for w in runs) / 40
        assert sum(w <= work for w in cautious) / len(cautious) == min(by_ratio, by_task)


def test_the_tighter_bound_is_not_taken_where_it_undercuts_the_work() -> None:
    # Deadlines that say nothing of the work (drawn apart from it, as with a template's):
    # the smaller bound is often below the run, which its quantile loss charges 19 times as
    # much, so the better of the two predictors bounds alone.
    est = Estimator(EstimatorParams(min_samples=3))
    rng = random.Random(3)
    for _ in range(60):
        work = 2 * rng.uniform(9.0, 11.0)
        est.learn(_o(A, work, tasks=2, deadline=rng.uniform(10.0, 60.0)))
    entry = est.entries()["sigA"]
    assert entry["tighter_bound_loss"] > entry["task_s_bound_loss"]
    for deadline in (10.0, 15.0, 40.0):
        e = est.estimate(A, tasks=2, deadline_s=deadline, max_cpus=2)
        assert e.source == "task_s@sigA"
        assert e.upper == pytest.approx(quantile(est._series["sigA"].task_s, 0.95) * 2)


def test_error_counts_predictions_off_by_2x() -> None:
    est = Estimator(EstimatorParams(min_samples=1))
    est.learn(_o(A, 100.0))  # predicted from bootstrap: 100 * 2 = 200 (off by exactly 2x)
    est.learn(_o(A, 100.0))  # ratio 0.5 -> 100: exact
    err = est.error("sigA")
    assert err["predictions"] == 2 and err["off_by_2x"] == 0.5
    assert err["mean_abs_log_error"] == pytest.approx(math.log(2) / 2)


def test_rebuild_gives_the_same_estimates_as_incremental_learning() -> None:
    outcomes = [_o(A, w) for w in (30.0, 60.0, 90.0, 10.0)] + [_o(C, 5.0)]
    inc = Estimator()
    for o in outcomes:
        inc.learn(o)
    again = rebuild(outcomes)
    assert again.entries() == inc.entries()
    assert again.estimate(A, 2, 100.0, 2) == inc.estimate(A, 2, 100.0, 2)


def test_window_forgets_old_runs() -> None:
    est = Estimator(EstimatorParams(window=2, min_samples=1))
    for w in (200.0, 20.0, 20.0):
        est.learn(_o(A, w))
    assert est.samples("sigA") == 2
    assert est.estimate(A, 2, 100.0, 2).upper == pytest.approx(20.0)


def test_outcome_validation_names_the_field() -> None:
    with pytest.raises(PolicyError, match=r"outcome\.work"):
        _o(A, 0.0)
    with pytest.raises(PolicyError, match=r"outcome\.overhead_s"):
        Outcome(A, 2, 10.0, 100.0, max_cpus=2, overhead_s=-1.0)


def test_start_up_comes_from_the_most_specific_key_with_enough_runs() -> None:
    est = Estimator(EstimatorParams(min_samples=2, quantile=0.95))
    est.learn(_o(A, 40.0))  # no start-up reported (a foreign app): teaches work only
    assert est.estimate(A, 2, 100.0, 2).overhead_s == 0.0
    for s in (4.0, 9.0):
        est.learn(Outcome(A, 2, 40.0, 100.0, max_cpus=2, overhead_s=s))
    est.learn(Outcome(B, 2, 40.0, 100.0, max_cpus=2, overhead_s=30.0))
    # A has two samples of its own (its bound is the larger); B has one, so its user's key
    # (A's two and B's one) answers; C shares only the queue key, which holds the same three
    assert est.estimate(A, 2, 100.0, 2).overhead_s == 9.0
    assert est.estimate(B, 2, 100.0, 2).overhead_s == 30.0
    assert est.estimate(C, 2, 100.0, 2).overhead_s == 30.0
    assert est.entries()["sigA"]["overhead_s_upper"] == 9.0
    # the work bound is unaffected by start-up
    assert est.estimate(A, 2, 100.0, 2).upper == pytest.approx(40.0)


def test_the_start_up_prior_holds_until_enough_start_ups_are_known() -> None:
    # 0.75 needs 3 start-ups for its quantile to be one of them (0.75 / 0.25)
    est = Estimator(EstimatorParams(min_samples=1, quantile=0.75, startup_s=10.0))
    assert est.estimate(A, 2, 100.0, 2).overhead_s == 10.0  # nothing known: the prior
    est.learn(_o(A, 40.0))  # a foreign app teaches no start-up
    assert est.estimate(A, 2, 100.0, 2).overhead_s == 10.0
    est.learn(Outcome(A, 2, 40.0, 100.0, max_cpus=2, overhead_s=4.0))
    assert est.estimate(A, 2, 100.0, 2).overhead_s == 10.0  # one of 3 seen: no less than 10
    est.learn(Outcome(B, 2, 40.0, 100.0, max_cpus=2, overhead_s=25.0))
    assert est.estimate(B, 2, 100.0, 2).overhead_s == 25.0  # a longer one seen counts
    assert est.estimate(A, 2, 100.0, 2).overhead_s == 10.0
    est.learn(Outcome(A, 2, 40.0, 100.0, max_cpus=2, overhead_s=5.0))
    # three seen: learned alone (A's own 0.75 quantile of 4 and 5), below the prior
    assert est.estimate(A, 2, 100.0, 2).overhead_s == 5.0
    assert est.startup() == {"prior_s": 10.0, "seen": 3, "needed": 3, "prior_holds": False}
    with pytest.raises(PolicyError, match="startup_s"):
        EstimatorParams(startup_s=-1.0)


def test_works_is_the_distribution_the_bound_is_a_quantile_of() -> None:
    keys = Keys("sig", "user", "queue")
    est = Estimator()
    for w in (60.0, 100.0, 80.0):  # deadline 100 s on 2 vcores: ratios 0.3, 0.5, 0.4
        est.learn(Outcome(keys, tasks=2, work=w, deadline_s=100.0, max_cpus=2))
    # the ratio predictor bounds (too few scored predictions to prefer task seconds): each ratio
    # scaled by this job's own deadline window, 50 s on 2 vcores
    assert est.works(keys, 2, 50.0, 2) == pytest.approx([30.0, 40.0, 50.0])
    assert est.estimate(keys, 2, 50.0, 2).upper == pytest.approx(50.0)
    # with no deadline only task seconds predict: 30, 40, 50 per task, times 4 tasks
    assert est.works(keys, 4, None, 4) == pytest.approx([120.0, 160.0, 200.0])


def _answer(est: Estimator, keys: Keys, tasks: int, deadline: float | None) -> object:
    try:
        return est.estimate(keys, tasks, deadline, 4), est.works(keys, tasks, deadline, 4)
    except PolicyError as exc:
        return str(exc)


# Another queue's: no key in common with A, B and C but the global one.
D = Keys("sigD", "u3|t", "q2")
# A foreign app's signature: it teaches no start-up, so its own comes from its user's.
E = Keys("sigE", "u1|t", "q")


def _random_outcome(rng: random.Random, start_ups: bool) -> Outcome:
    keys, tasks, work = rng.choice((A, B, C, D, E)), rng.randint(1, 8), rng.uniform(5.0, 400.0)
    overhead = rng.choice((None, rng.uniform(1.0, 9.0))) if start_ups and keys != E else None
    deadline = rng.choice((None, 100.0, 100.0, 100.0))
    return Outcome(keys, tasks, work, deadline, max_cpus=rng.randint(1, 8), overhead_s=overhead)


@pytest.mark.parametrize("start_ups", [True, False], ids=["start-ups", "simulator"])
@pytest.mark.parametrize("seed", [7, 8])
def test_estimates_between_runs_equal_a_fresh_estimators_at_every_step(
    start_ups: bool, seed: int
) -> None:
    # Estimates are kept until a run is learned at a key they read: each learned run must show
    # in the next answer exactly as in an estimator that never answered, whichever keys the
    # answer read (its signature, its user's or queue's ratios, the global ones, start-ups).
    rng = random.Random(seed)
    outcomes = [_random_outcome(rng, start_ups) for _ in range(200)]
    # a prior above every start-up seen: every start-up bound changes once the prior stops holding
    params = EstimatorParams(window=16, startup_s=20.0)
    inc = Estimator(params)
    for n, outcome in enumerate(outcomes, start=1):
        inc.learn(outcome)
        fresh = rebuild(outcomes[:n], params)
        for keys in (A, B, C, D, E):
            for tasks, deadline in ((1, 60.0), (4, 100.0), (8, None)):
                assert _answer(inc, keys, tasks, deadline) == _answer(fresh, keys, tasks, deadline)


def test_the_index_of_kept_estimates_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # Waiting jobs of a signature with no runs read the whole chain; runs of another signature
    # of the same user drop their estimates through the user's key every time, and each new
    # estimate lists them again under their own signature, which never learns.
    monkeypatch.setattr(estimator_module, "_READERS_LIMIT", 200)
    est = Estimator(EstimatorParams(window=16))
    outcomes = []
    for i in range(300):
        for tasks in range(1, 21):
            est.estimate(A, tasks, 100.0, tasks)
        outcomes.append(_o(B, 10.0 + i % 7))
        est.learn(outcomes[-1])
        assert sum(len(v) for v in est._readers.values()) <= 200 + 20 * 4
    fresh = rebuild(outcomes, EstimatorParams(window=16))
    for tasks in range(1, 21):
        assert est.estimate(A, tasks, 100.0, tasks) == fresh.estimate(A, tasks, 100.0, tasks)


def _task_runs(est: Estimator, keys: Keys, *work: float) -> None:
    for w in work:
        est.learn(Outcome(keys, tasks=1, work=w, deadline_s=None, max_cpus=1))


def _calibration(est: Estimator) -> tuple[object, object]:
    totals = est.totals()
    return totals["bounds_checked"], totals["above_bound"]


def test_totals_count_how_often_runs_exceeded_the_bound_they_would_have_had() -> None:
    est = Estimator()
    # three runs bound a signature (their largest); only from the fourth is there a bound
    _task_runs(est, A, 10.0, 10.0, 10.0)
    assert _calibration(est) == (0, None)
    # the bound is the 0.95 nearest rank of the window: 10 before 20 (4th of 4), 20 before 40,
    # 40 before 30
    _task_runs(est, A, 10.0, 20.0, 40.0, 30.0)
    assert _calibration(est) == (4, 0.5)
    # pooled over signatures, and the same after a restart (a rebuild from the same runs)
    _task_runs(est, B, 5.0, 5.0, 5.0, 15.0)
    assert _calibration(est) == (5, pytest.approx(3 / 5))
    outcomes = [Outcome(A, 1, w, None, 1) for w in (10.0, 10.0, 10.0, 10.0, 20.0, 40.0, 30.0)]
    outcomes += [Outcome(B, 1, w, None, 1) for w in (5.0, 5.0, 5.0, 15.0)]
    assert rebuild(outcomes).totals() == est.totals()


def test_calibration_keeps_the_last_window_of_runs() -> None:
    est = Estimator()
    _task_runs(est, A, 10.0, 10.0, 10.0, 20.0)  # one run above its bound
    assert _calibration(est) == (1, 1.0)
    _task_runs(est, A, *([20.0] * estimator_module.OVERRUN_WINDOW))
    assert _calibration(est) == (estimator_module.OVERRUN_WINDOW, 0.0)  # it has left
