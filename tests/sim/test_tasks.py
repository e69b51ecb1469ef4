"""The task-level, non-preemptive fair scheduler (``app/sim/tasks.py``; Justice thesis, seed 004,
chapter 5's Baseline FS is YARN's fair scheduler, which never preempts running tasks).

Expected times below are worked out by hand from the scenario, not read from the simulator.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from app.sim import cli, experiment, trace
from app.sim.cluster import ClusterSpec
from app.sim.engine import PRIORITY_ARRIVAL, Engine
from app.sim.jobs import JobRun, SimJob, Status
from app.sim.runner import SimResult
from app.sim.tasks import TaskCluster, make_cluster, wave_runtime, work_done_in_waves


def _ends(
    jobs: list[SimJob], cap: int, name: str = "baseline-fs", model: str = "tasks"
) -> dict[str, float]:
    r = experiment.run_policy(name, jobs, ClusterSpec(cap), model=model)
    assert all(run.end_s is not None for run in r.runs)
    return {run.job.job_id: float(run.end_s or 0.0) for run in r.runs}


def test_running_tasks_are_not_preempted_by_a_new_job() -> None:
    # a: 4 tasks of 100 s fill the 4 containers; b (one 50 s task) arrives at 10 s and must
    # wait for a container: a ends at 100, b at 100 + 50.
    jobs = [SimJob("a", 0, 4, 400.0), SimJob("b", 10, 1, 50.0)]
    ends = _ends(jobs, 4)
    assert ends["a"] == pytest.approx(100.0)
    assert ends["b"] == pytest.approx(150.0)
    # the fluid model re-shares at once: b runs from 10 s and a is slowed down
    fluid = _ends(jobs, 4, model="fluid")
    assert fluid["b"] < 100.0 and fluid["a"] > 100.0


def test_a_free_container_goes_to_the_job_with_fewest_running() -> None:
    # 2 containers. a: 4 x 100 s at 0 holds both until 100. b: 2 x 100 s at 10. At 100 both
    # have 0 running: one container each (a first on the tie). At 200 again one each: both
    # end at 300. (Greedy FIFO would give a both at 100 and end a at 200.)
    jobs = [SimJob("a", 0, 4, 400.0), SimJob("b", 10, 2, 200.0)]
    ends = _ends(jobs, 2)
    assert ends["a"] == pytest.approx(300.0)
    assert ends["b"] == pytest.approx(300.0)


def test_waves_of_a_fixed_grant() -> None:
    # 10 tasks of 10 s on 3 containers: 4 waves (3, 3, 3, 1) = 40 s.
    assert wave_runtime(10, 3, 10.0) == pytest.approx(40.0)
    assert wave_runtime(2, 5, 7.0) == pytest.approx(7.0)
    # after 25 s: two full waves (6 tasks, 60 vcore-s) plus 3 tasks 5 s into the third.
    assert work_done_in_waves(10, 3, 10.0, 25.0) == pytest.approx(75.0)
    # after the end every task is done and nothing more is counted
    assert work_done_in_waves(10, 3, 10.0, 100.0) == pytest.approx(100.0)


def test_kill_counts_finished_and_elapsed_task_time() -> None:
    engine = Engine()
    ended: list[JobRun] = []
    cl = make_cluster("tasks", engine, ClusterSpec(3), ended.append)
    run = JobRun(SimJob("g", 0, 10, 100.0), 3)
    cl.start_fixed(run, 3)
    engine.schedule(25.0, lambda: cl.kill(run, "test"), PRIORITY_ARRIVAL)
    engine.run()
    assert run.status is Status.KILLED and ended == [run]
    assert run.consumed == pytest.approx(75.0)
    assert cl.busy_integral == pytest.approx(3 * 25.0)


def _synthetic(seed: int, kind: str, cap: int = 100, n: int = 300) -> list[SimJob]:
    base = trace.synthetic(trace.SyntheticSpec(jobs=n, mean_interarrival_s=5.0), seed)
    return experiment.with_deadlines(base, kind, cap, seed)


def _starter(cl: TaskCluster, run: JobRun) -> Callable[[], None]:
    return lambda: cl.start_fair(run)


def test_capacity_is_never_exceeded_at_any_event() -> None:
    jobs = _synthetic(5, "Jockey1x2x", cap=40, n=120)
    engine = Engine()
    ended: list[JobRun] = []
    cl = make_cluster("tasks", engine, ClusterSpec(40), ended.append)
    assert isinstance(cl, TaskCluster)
    for job in jobs:
        cl.queue_index(job.queue)
        engine.schedule(job.submit_s, _starter(cl, JobRun(job, job.max_cpus(40))), PRIORITY_ARRIVAL)
    peak = 0
    while engine.step():
        assert 0 <= cl.fs_running <= cl.capacity
        assert sum(int(r) for r in cl.pool.rate[: cl.pool.n]) == cl.fs_running
        peak = max(peak, cl.fs_running)
    assert len(ended) == len(jobs) and peak == 40


@pytest.mark.parametrize("name", ["baseline-fs", "reactive-fs", "oracle", "justice"])
def test_work_is_conserved(name: str) -> None:
    jobs = _synthetic(3, "Jockey1x2x", n=150)
    r = experiment.run_policy(name, jobs, ClusterSpec(100), model="tasks")
    assert len(r.runs) == len(jobs) and all(run.end_s is not None for run in r.runs)
    assert max(r.series.utilization) <= 1.0 + 1e-9
    consumed = sum(run.consumed for run in r.runs)
    for run in r.runs:
        if run.status in (Status.SUCCEEDED, Status.MISSED):
            assert run.consumed == run.job.work
        assert run.consumed <= run.job.work + 1e-9
    if name.endswith("-fs"):
        # containers are busy exactly while a task runs
        assert r.busy_vcore_s == pytest.approx(consumed, rel=1e-9)
    else:
        # a grant also holds its idle containers during the last, partial wave
        assert r.busy_vcore_s >= consumed - 1e-6
    if name == "baseline-fs":
        assert consumed == pytest.approx(sum(j.work for j in jobs), rel=1e-12)


def _sdr(r: SimResult) -> float:
    return float(r.summary()["sdr"])  # type: ignore[arg-type]


@pytest.mark.parametrize(("seed", "kind"), [(1, "Jockey1x2x"), (2, "Jockey1x2x"), (1, "Fixed2x")])
def test_admission_control_meets_more_deadlines_than_task_level_baseline(
    seed: int, kind: str
) -> None:
    # The thesis' claim (5.4.2) on a constrained seeded workload, in task mode. Without
    # preemption a newly arrived job waits for a container, so the baseline also does worse
    # than under the fluid model.
    jobs = _synthetic(seed, kind)
    spec = ClusterSpec(100)
    base = experiment.run_policy("baseline-fs", jobs, spec, model="tasks")
    fluid = experiment.run_policy("baseline-fs", jobs, spec)
    assert _sdr(base) < _sdr(fluid)
    for name in ("oracle", "justice"):
        assert _sdr(experiment.run_policy(name, jobs, spec, model="tasks")) > _sdr(base), name


def test_reactive_fs_kills_at_the_deadline_in_task_mode() -> None:
    # one container; a (2 x 100 s) runs first, b (1 x 100 s, deadline 150 s) queues behind
    # it and cannot end before 200 s: Reactive FS kills b at 10 + 150 = 160 s having run
    # nothing, while Baseline FS lets it miss at 300 s.
    jobs = [SimJob("a", 0, 2, 200.0, deadline_s=400.0), SimJob("b", 10, 1, 100.0, deadline_s=150.0)]
    r = experiment.run_policy("reactive-fs", jobs, ClusterSpec(1), model="tasks")
    runs = {run.job.job_id: run for run in r.runs}
    assert runs["b"].status is Status.KILLED and runs["b"].end_s == pytest.approx(160.0)
    assert runs["b"].consumed == pytest.approx(0.0)
    assert runs["a"].status is Status.SUCCEEDED and runs["a"].end_s == pytest.approx(200.0)
    base = _ends(jobs, 1)
    assert base["b"] == pytest.approx(300.0)


def test_unknown_model_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown model"):
        make_cluster("per-task", Engine(), ClusterSpec(1), lambda run: None)


def test_cli_runs_the_task_model(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser(prog="yarn-sidecar")
    cli.configure(parser.add_subparsers(dest="command", required=True))
    common = ["--trace", "synthetic", "--synthetic-jobs", "80", "--capacity", "40", "--quiet"]
    summaries = {}
    for model in ("fluid", "tasks"):
        out = tmp_path / model
        argv = ["simulate", *common, "--no-plots", "--model", model, "--out", str(out)]
        args = parser.parse_args([*argv, "--policy", "baseline-fs", "--deadlines", "Jockey1x2x"])
        assert int(args.func(args)) == 0
        summaries[model] = json.loads((out / "summary.json").read_text())
    assert summaries["tasks"]["config"]["model"] == "tasks"
    assert summaries["fluid"]["config"]["model"] == "fluid"
    # per-wave events: the task model needs more than one event per job arrival and completion
    assert summaries["tasks"]["summary"]["events"] > summaries["fluid"]["summary"]["events"]


def test_queue_maximum_share_holds_in_task_mode() -> None:
    # Fawkes' None: queues may not borrow (maximum-capacity = capacity), and each of the two keeps
    # its minimum bound of 25 %, so neither ever holds more than 75 % of the cluster; under EQ a
    # queue alone borrows beyond that. The task scheduler must honour the maximum.
    jobs = trace.synthetic(trace.SyntheticSpec(jobs=200, mean_interarrival_s=5.0), 4)
    none = experiment.run_policy("fawkes:None", jobs, ClusterSpec(100), model="tasks")
    eq = experiment.run_policy("fawkes:EQ", jobs, ClusterSpec(100), model="tasks")

    # (Until the first push, one tick after the first demand, the queues hold the initial 50/50
    # with maximum 100, as live queues do before the controller's first push.)
    def over(r: SimResult) -> int:
        settled = [k for k, t in enumerate(r.series.t) if t > r.series.control_t[2]]
        return sum(1 for k in settled for u in r.series.queue_used.values() if u[k] > 0.75 + 1e-9)

    assert over(none) == 0
    assert over(eq) > 0
    assert all(run.end_s is not None for run in none.runs)


def test_a_grant_cannot_take_containers_running_tasks() -> None:
    engine = Engine()
    cl = make_cluster("tasks", engine, ClusterSpec(4), lambda run: None)
    cl.queue_index("default")
    cl.start_fair(JobRun(SimJob("a", 0, 3, 300.0), 3))
    engine.run(until=1.0)
    assert cl.free == 1
    with pytest.raises(ValueError, match="does not fit"):
        cl.start_fixed(JobRun(SimJob("g", 1, 2, 20.0), 2), 2)
