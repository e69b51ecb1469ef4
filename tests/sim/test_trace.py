"""Trace loaders on real rows of the shared traces (``../shared/traces``) and on small files."""

from __future__ import annotations

import gzip
import math
import os
from pathlib import Path

import pytest

from app.domain.model import AppRecord, Resources
from app.sim import trace
from app.sim.jobs import SimJob

# The traces live in shared/ beside the repository (as in CI); YARN_SIDECAR_TRACES overrides.
TRACES = Path(
    os.environ.get("YARN_SIDECAR_TRACES", Path(__file__).resolve().parents[3] / "shared" / "traces")
)
needs_traces = pytest.mark.skipif(
    not TRACES.exists() and os.environ.get("CI") != "true",
    reason=f"shared traces not found at {TRACES}",
)


@needs_traces
def test_swim_first_row_uses_64mib_splits_and_the_rate() -> None:
    jobs = trace.load_swim(TRACES / "swim" / "FB-2009_samples_24_times_1hr_0.tsv")
    assert len(jobs) == 5894  # README: 5,894 jobs
    j = jobs[0]  # job0  49  49  740773  2339561  627471
    assert j.submit_s == 49 and j.tasks == 1 and j.input_bytes == 740773
    assert j.work == pytest.approx(5 + (740773 + 2339561 + 627471) / (32 * 1024 * 1024))
    assert j.queue == "FB-2009_samples_24_times_1hr_0"
    assert all(x.tasks == max(1, math.ceil(x.input_bytes / (64 * 1024 * 1024))) for x in jobs)


@needs_traces
def test_google_first19h_rows() -> None:
    jobs = trace.load_google(TRACES / "google2011" / "jobs_with_tasks_first19h.csv.gz", "user")
    # 15,165 rows, 265 with task_seconds_total = 0 are skipped
    assert len(jobs) == 15165 - 265
    first = jobs[0]  # 6251639646,81,1,9,604,605,675,FINISH,1,1,70,70,...
    assert (first.job_id, first.submit_s, first.tasks, first.work) == ("6251639646", 604, 1, 70)
    assert first.runtime_s == 70 and first.queue == "u81"


def test_google29d_streams_skips_unfinished_and_reports_progress(tmp_path: Path) -> None:
    p = tmp_path / "jobs_29d.csv.gz"
    rows = [
        "job_id,user_id,sched_class,submit_s,schedule_s,end_s,final_status,n_submits",
        "1,0,3,0,0,,,1",  # still running at the end: skipped
        "259659137,12,3,0,0,342417,KILL,1",  # real row: existed before the trace
        "5,7,1,100,130,190,FINISH,1",
    ]
    with gzip.open(p, "wt") as fh:
        fh.write("\n".join(rows) + "\n")
    seen: list[int] = []
    jobs = list(trace.iter_google29d(p, "group:4", seen.append, every=1))
    assert [(j.job_id, j.submit_s, j.tasks, j.work) for j in jobs] == [
        ("259659137", 0, 1, 342417),
        ("5", 100, 1, 60),
    ]
    assert jobs[0].queue == "g0" and jobs[1].queue == "g3"
    assert seen == [1, 2, 3]


def test_csv_round_trip_and_unknown_column(tmp_path: Path) -> None:
    jobs = [
        SimJob("a", 0.5, 3, 30.0, queue="q1", user="u", input_bytes=1e6, runtime_s=12.0),
        SimJob("b", 2.0, 1, 5.0, deadline_s=9.0),
    ]
    p = tmp_path / "jobs.csv"
    trace.write_csv(jobs, p)
    assert trace.load_csv(p) == jobs
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,submit_s,tasks,work_vcore_s,colour\na,0,1,1,red\n")
    with pytest.raises(trace.TraceError, match="colour"):
        trace.load_csv(bad)


def test_synthetic_is_seeded() -> None:
    spec = trace.SyntheticSpec(jobs=50)
    assert trace.synthetic(spec, 7) == trace.synthetic(spec, 7)
    assert trace.synthetic(spec, 7) != trace.synthetic(spec, 8)


def _app(app_id: str, sub: int, start: int, end: int | None, vcs: int) -> AppRecord:
    return AppRecord(
        app_id=app_id,
        user="alice",
        queue="root.etl",
        name="n",
        app_type="MAPREDUCE",
        tags=(),
        state="FINISHED" if end else "RUNNING",
        final_status="SUCCEEDED",
        progress=100.0,
        submitted_ms=sub,
        started_ms=start,
        launched_ms=start,
        finished_ms=end,
        elapsed_ms=0,
        allocated=Resources(),
        vcore_seconds=vcs,
        memory_seconds=0,
        running_containers=0,
        priority=0,
    )


def test_jobs_from_app_records() -> None:
    records = [
        _app("app_2", 10_000, 12_000, 22_000, 40),  # 10 s runtime, 40 vcore-s: 4 tasks
        _app("app_1", 4_000, 5_000, 7_000, 2),
        _app("app_3", 1_000, 2_000, None, 5),  # still running: ignored
    ]
    jobs = trace.jobs_from_app_records(records)
    assert [(j.job_id, j.submit_s, j.tasks, j.work, j.runtime_s) for j in jobs] == [
        ("app_2", 6.0, 4, 40.0, 10.0),
        ("app_1", 0.0, 1, 2.0, 2.0),
    ]
    assert jobs[0].queue == "root.etl"


def test_peak_parallelism_by_hand() -> None:
    jobs = [
        SimJob("a", 0, 4, 40.0, runtime_s=10.0),  # 4 vcores over [0, 10]
        SimJob("b", 5, 2, 20.0, runtime_s=10.0),  # 2 vcores over [5, 15]
    ]
    assert trace.peak_parallelism(jobs) == 6


def test_swim_with_input_paths_variant_loads_like_the_plain_file(tmp_path: Path) -> None:
    plain = tmp_path / "plain.tsv"
    paths = tmp_path / "paths.tsv"
    plain.write_text("job0\t49\t49\t740773\t2339561\t627471\njob1\t101\t52\t136346\t0\t0\n")
    paths.write_text(
        "job0\t49\t49\t740773\t2339561\t627471\t/in/a b\t/out/x\t0\n"
        "job1\t101\t52\t136346\t0\t0\t/in/c\t/out/y\t0\n"
    )
    a = trace.load_swim(plain, queue="q")
    b = trace.load_swim(paths, queue="q")
    assert a == b and len(a) == 2
    bad = tmp_path / "bad.tsv"
    bad.write_text("job0\t49\t49\t740773\t2339561\t627471\t/in\n")
    with pytest.raises(trace.TraceError, match=r"bad.tsv:1: expected 6 or 9"):
        trace.load_swim(bad)


def test_mean_demand_by_hand() -> None:
    jobs = [
        SimJob("a", 0, 4, 40.0, runtime_s=10.0),  # ends at 10
        SimJob("b", 5, 2, 20.0, runtime_s=15.0),  # ends at 20
    ]
    assert trace.mean_demand(jobs) == pytest.approx(60.0 / 20.0)
    assert trace.mean_demand([]) == 0.0
