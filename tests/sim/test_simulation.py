"""End-to-end runs on seeded synthetic workloads, one behavioural claim per allocator/policy.

Claims come from the papers: the Oracle never admits a job that will miss (seed 004, 4.2);
Reactive FS frees the resources of late jobs (5.2), so it wastes less than Baseline FS; PYTHIA
and Justice meet more deadlines than Baseline FS and waste less (4.4, 5.4.2, 5.4.3); Fawkes'
``None`` keeps queues on their minimum shares (seed 000, 4.3), so it uses less of the cluster
than ``EQ``; LTRF pays back a lender (seed 002, 9.4.3), MLRF does not.
"""

from __future__ import annotations

import dataclasses

import pytest

from app.sim import deadlines, experiment, recurring, trace
from app.sim.cluster import ClusterSpec
from app.sim.jobs import SimJob, Status
from app.sim.queue_policies import PlanSettings, make_queue_policy
from app.sim.runner import QueueObservation, SimResult
from tests.sim.test_trace import TRACES, needs_traces

CAP = 100


def _jobs(seed: int, kind: str = "Fixed2x") -> list[SimJob]:
    base = trace.synthetic(trace.SyntheticSpec(jobs=300, mean_interarrival_s=5.0), seed)
    return experiment.with_deadlines(base, kind, CAP, seed)


def _run(name: str, jobs: list[SimJob]) -> SimResult:
    return experiment.run_policy(name, jobs, ClusterSpec(CAP))


def _sdr(r: SimResult) -> float:
    return float(r.summary()["sdr"])  # type: ignore[arg-type]


def _wtr(r: SimResult) -> float:
    return float(r.summary()["wtr"])  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_oracle_meets_more_deadlines_than_baseline_and_wastes_nothing(seed: int) -> None:
    jobs = _jobs(seed)
    oracle, base = _run("oracle", jobs), _run("baseline-fs", jobs)
    assert _sdr(oracle) >= _sdr(base)
    assert _wtr(oracle) == 0.0
    assert all(r.status in (Status.SUCCEEDED, Status.DROPPED) for r in oracle.runs)


def test_reactive_fs_kills_instead_of_missing_and_wastes_less() -> None:
    jobs = _jobs(1, "Jockey1x2x")
    reactive, base = _run("reactive-fs", jobs), _run("baseline-fs", jobs)
    assert not any(r.status is Status.MISSED for r in reactive.runs)
    assert any(r.status is Status.KILLED for r in reactive.runs)
    assert _sdr(reactive) >= _sdr(base)
    assert _wtr(reactive) < _wtr(base)


@pytest.mark.parametrize("name", ["pythia", "justice"])
def test_admission_beats_baseline_on_deadlines_and_waste(name: str) -> None:
    jobs = _jobs(2)
    policy, base = _run(name, jobs), _run("baseline-fs", jobs)
    assert _sdr(policy) >= _sdr(base)
    assert _wtr(policy) < _wtr(base)
    assert policy.decisions["admit"] > 0 and policy.decisions["drop"] > 0


@pytest.mark.parametrize(
    "name",
    [
        "baseline-fs",
        "reactive-fs",
        "oracle",
        "pythia",
        "justice",
        "promise",
        "fawkes:TD",
        "ltrf",
        "rrf",
    ],
)
def test_never_over_capacity_and_every_job_ends(name: str) -> None:
    jobs = _jobs(3)
    r = _run(name, jobs)
    assert max(r.series.utilization) <= 1.0 + 1e-9
    assert len(r.runs) == len(jobs)
    assert all(run.end_s is not None for run in r.runs)
    assert r.busy_vcore_s <= CAP * (r.end_s - r.start_s) + 1e-6


@pytest.mark.parametrize("model", ["fluid", "tasks"])
def test_promise_keeps_waste_low_and_meets_as_many_deadlines_as_the_oracle(model: str) -> None:
    # Fixed2x: every job's deadline ratio is 0.5, which the estimator learns exactly, so Promise
    # plans with the Oracle's knowledge; its grants never overrun (whole waves in the task
    # model, where the Oracle's partial last wave does; the exact work in the fluid one) and it
    # holds back long jobs that would crowd out many short arrivals.
    jobs = _jobs(1)
    promise = experiment.run_policy("promise", jobs, ClusterSpec(CAP), model=model)
    oracle = experiment.run_policy("oracle", jobs, ClusterSpec(CAP), model=model)
    assert _sdr(promise) >= _sdr(oracle)
    assert _wtr(promise) <= 0.02
    assert not any(r.status is Status.MISSED for r in promise.runs)


def test_promise_plans_a_grant_as_the_cluster_model_runs_it() -> None:
    # Three tasks of 100 s due in 160 s on 2 vcores. The task model runs them in two waves
    # (200 s): refused at once. The fluid model runs the work at 2 vcores (150 s): promised.
    # With waste_price 0 a miss costs nothing, so the exact grant is taken; priced, this lone
    # job of no history (an even chance) waits for the grant of whole waves, which never fits.
    job = SimJob("j", 0.0, 3, 300.0, deadline_s=160.0)
    unpriced = {"waste_price": 0.0}
    (fluid,) = experiment.run_policy("promise", [job], ClusterSpec(2), unpriced, model="fluid").runs
    assert (fluid.status, fluid.grant) == (Status.SUCCEEDED, 2)
    assert fluid.end_s == pytest.approx(150.0)
    (tasks,) = experiment.run_policy("promise", [job], ClusterSpec(2), unpriced, model="tasks").runs
    assert tasks.status is Status.DROPPED and tasks.end_s == 0.0
    (priced,) = experiment.run_policy("promise", [job], ClusterSpec(2), model="fluid").runs
    assert priced.status is not Status.SUCCEEDED and priced.grant in (None, 0)


def test_promise_keeps_learning_when_deadlines_follow_templates_not_runs() -> None:
    # Deadlines from each template's median run (not the job's own): with x = 1, a run slower
    # than its template's median cannot meet its deadline. On this seed the first three runs
    # all needed more than their deadline at full parallelism, and the cluster's ratios they
    # taught refused every later job of a new signature: nothing ran again, nothing was learned,
    # and Promise met no deadline at all. Small jobs of unknown signatures are now explored.
    jobs = recurring.recurring(recurring.RecurringSpec(jobs=300), 1)
    cap = experiment.resolve_capacity("2x-mean", jobs)
    dj = deadlines.assign_deadlines(jobs, "Fixed1x", cap, 0, "template")
    promise = experiment.run_policy("promise", dj, ClusterSpec(cap), model="fluid")
    pythia = experiment.run_policy("pythia", dj, ClusterSpec(cap), model="fluid")
    assert _sdr(promise) >= _sdr(pythia) - 0.1
    assert _wtr(promise) < _wtr(pythia)


@needs_traces
def test_one_task_jobs_of_unknown_signatures_are_not_started_to_miss_after_waiting() -> None:
    # The 29-day Google file: one task per job, 46 users in these 300. Every job is small in
    # vcores, and most signatures have too few runs; started after a wait, when the history they
    # borrow says they miss, such jobs ran past their deadlines (kept as small and learning)
    # and wasted 85 % of the work here, where the Oracle wastes none. They are explored only
    # at their first round.
    jobs = trace.load_google29d(TRACES / "google2011" / "jobs_29d.csv.gz", "user", limit=60_300)
    t0 = jobs[60_000].submit_s
    later = [dataclasses.replace(j, submit_s=j.submit_s - t0) for j in jobs[60_000:]]
    cap = experiment.resolve_capacity("2x-mean", later)
    dj = deadlines.assign_deadlines(later, "Fixed1x", cap, 0, "ideal")
    promise = experiment.run_policy("promise", dj, ClusterSpec(cap), model="fluid")
    oracle = experiment.run_policy("oracle", dj, ClusterSpec(cap), model="fluid")
    assert _wtr(promise) <= 0.02
    assert _sdr(promise) >= _sdr(oracle)


@pytest.mark.parametrize("model", ["fluid", "tasks"])
def test_promise_ends_a_job_its_first_wave_shows_will_miss(model: str) -> None:
    # Three runs teach the signature 10 s tasks; the fourth has 30 s tasks. Promised 2 vcores
    # (4 waves of its bound fit its 40 s deadline), its first wave has run 10 s without ending
    # at 110 s: 4 waves end at 140 s at the earliest, its deadline. Killed then, it has used 20
    # vcore-seconds, where the kill at its deadline would have burned 80.
    jobs = [SimJob(f"etl-{i}", 30.0 * i, 4, 40.0, name="etl", deadline_s=20.0) for i in range(3)]
    jobs.append(SimJob("etl-big", 100.0, 8, 240.0, name="etl", deadline_s=40.0))
    runs = {
        r.job.job_id: r
        for r in experiment.run_policy("promise", jobs, ClusterSpec(4), model=model).runs
    }
    big = runs["etl-big"]
    assert big.status is Status.KILLED and big.grant == 2
    assert big.end_s == pytest.approx(110.0) and big.consumed == pytest.approx(20.0)
    assert "first tasks ran 10s" in big.reason
    assert all(runs[f"etl-{i}"].status is Status.SUCCEEDED for i in range(3))


@pytest.mark.parametrize("model", ["fluid", "tasks"])
def test_promise_ends_a_job_its_progress_shows_will_miss(model: str) -> None:
    # Three runs teach the signature 10 s tasks; the fourth has 40 s tasks. Promised its 4
    # vcores (one wave of its bound fits its 15 s deadline, two would not), its tasks'
    # durations cannot show the miss before its deadline; its progress does, ``progress_s``
    # (5 s here) after its start: killed then, it has used 20 vcore-seconds. Without it, no
    # round comes before the job's end (nothing else arrives or ends), and it burns all 160.
    jobs = [SimJob(f"etl-{i}", 50.0 * i, 4, 40.0, name="etl", deadline_s=15.0) for i in range(3)]
    jobs.append(SimJob("etl-big", 200.0, 4, 160.0, name="etl", deadline_s=15.0))
    for seen, status, end, why in (
        (
            5.0,
            Status.KILLED,
            205.0,
            "its progress ends it at now+35.0s, after its deadline now+10.0s",
        ),
        (0.0, Status.MISSED, 240.0, ""),
    ):
        params = {"progress_s": seen}
        result = experiment.run_policy("promise", jobs, ClusterSpec(4), params, model=model)
        runs = {r.job.job_id: r for r in result.runs}
        big = runs["etl-big"]
        assert big.status is status and big.grant == 4
        assert big.end_s == pytest.approx(end) and big.consumed == pytest.approx(4 * (end - 200))
        assert why in big.reason
        assert all(runs[f"etl-{i}"].status is Status.SUCCEEDED for i in range(3))


@pytest.mark.parametrize("model", ["fluid", "tasks"])
def test_promise_learns_from_the_runs_it_kills(model: str) -> None:
    # One signature, four 10 s tasks a run, a run every 100 s: four loose deadlines (20 s, x = 2)
    # then a tight one (10 s, x = 1). The runs that end teach only the loose ratio 0.5, which
    # bounds a tight run at half its work: promised 2 vcores and killed at its first wave. Had
    # only ended runs been learned, every tight run would be promised the same and killed (16 of
    # 16 were). Each kill is learned as the least work the run showed, and once the runs known
    # to be larger than every ended one are too many for the ratio's quantile, the task
    # seconds (10 s) bound the tight runs: 4 vcores, met.
    jobs = [
        SimJob(f"etl-{i}", 100.0 * i, 4, 40.0, name="etl", deadline_s=10.0 if i % 5 == 4 else 20.0)
        for i in range(80)
    ]
    runs = experiment.run_policy("promise", jobs, ClusterSpec(8), model=model).runs
    tight = [r for r in runs if r.job.deadline_s == 10.0]
    killed = [r for r in tight if r.status is Status.KILLED]
    assert len(tight) == 16 and len(killed) <= 2
    assert all(r.grant == 4 and r.status is Status.SUCCEEDED for r in tight if r not in killed)
    assert all(r.status is Status.SUCCEEDED for r in runs if r.job.deadline_s == 20.0)


def test_runs_are_deterministic() -> None:
    jobs = _jobs(1, "Aria1x3x")
    a, b = _run("justice", jobs).summary(), _run("justice", jobs).summary()
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b


def _mean_used(r: SimResult) -> float:
    return r.busy_vcore_s / (r.end_s - r.start_s)


def test_fawkes_none_stays_on_minimum_shares() -> None:
    jobs = trace.synthetic(trace.SyntheticSpec(jobs=200, mean_interarrival_s=5.0), 4)
    none, eq = _run("fawkes:None", jobs), _run("fawkes:EQ", jobs)
    assert _mean_used(none) < _mean_used(eq)
    # Two queues with the reserved minimum shares of 0.25 each (the minimum bounds), pushed as
    # capacities summing to 100 with maximum-capacity = capacity: no queue borrows.
    for shares in none.series.shares.values():
        assert shares and min(shares) >= 0.25 - 1e-9
    policy = make_queue_policy("fawkes:None", ["a", "b"])
    busy = QueueObservation(1, 4.0, 0.0, 1, 2.0, 0.02, 0.1, 0, 0, 6.0, ())
    policy.decide(60.0, {"a": busy, "b": busy}, CAP)
    assert all(v["capacity"] == v["maximum-capacity"] for v in policy.live.values())
    assert max(none.series.factor) >= 0.0


def _lender_then_borrower() -> list[SimJob]:
    # a runs alone first, borrowing the idle share of b; then both want the whole cluster
    return [
        SimJob("a1", 0, 10, 10 * 600.0, queue="a"),
        SimJob("a2", 600, 10, 10 * 600.0, queue="a"),
        SimJob("b1", 600, 10, 10 * 600.0, queue="b"),
    ]


def _b1_finish(name: str, plan: PlanSettings) -> float:
    r = experiment.run_policy(name, _lender_then_borrower(), ClusterSpec(10), plan=plan)
    return next(run.end_s for run in r.runs if run.job.job_id == "b1")


def test_ltrf_pays_back_the_lender_and_mlrf_does_not() -> None:
    free = PlanSettings(max_step_pp=100.0, min_change_pp=0.0)
    # MLRF splits 5/5 after t=600: b1 needs 1200 s. LTRF favours b (a used 6000 vcore-s alone).
    assert _b1_finish("mlrf", free) == pytest.approx(1800.0, abs=61.0)
    assert _b1_finish("ltrf", free) < 1800.0 - 300


def test_the_controllers_step_limit_slows_the_payback() -> None:
    # the controller moves at most 10 points per 60 s tick, so b reaches its LTRF share later
    limited, free = PlanSettings(), PlanSettings(max_step_pp=100.0, min_change_pp=0.0)
    assert _b1_finish("mlrf", limited) == pytest.approx(1800.0, abs=61.0)
    assert _b1_finish("ltrf", free) < _b1_finish("ltrf", limited) < 1800.0
