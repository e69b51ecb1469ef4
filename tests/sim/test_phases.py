"""Phase-level simulation, hand-computed: task-level containers hold a task's peak for its whole
run; PRISM holds each phase's own demand, pauses tasks between phases and starts the next phase
when Algorithm 1 finds it worth it (heartbeats every second while tasks wait)."""

from __future__ import annotations

import pytest

from app.domain.history import Counter, MapReduceJob
from app.policies.prism import core
from app.sim.phases import PhaseJob, check_fits, recorded_jobs, simulate, synthetic_jobs

NODE = core.Demand(2, 4096)


def _profile(
    m: tuple[float, float, float],
    g: tuple[float, float, float],
    s: tuple[float, float, float] = (1, 1024, 4),
    r: tuple[float, float, float] = (1, 1024, 6),
) -> core.JobProfile:
    return core.JobProfile(
        core.PhaseProfile(*m), core.PhaseProfile(*g), core.PhaseProfile(*s), core.PhaseProfile(*r)
    )


def test_one_job_map_then_reduce() -> None:
    job = PhaseJob("j", 0.0, 1, 1, _profile((1, 1024, 10), (1, 1024, 5)))
    task = simulate([job], 1, NODE, "task")
    # map task 10 + 5 s, then the reduce task 4 + 6 s
    assert task.running_s == {"j": 25.0}
    prism = simulate([job], 1, NODE, "prism")
    # a paused phase of a lone job has utility 0.1 * T^2: it starts on the heartbeat 1 s later,
    # after the map (10 -> 11, merge to 16) and after the shuffle (20 -> 21, reduce to 27)
    assert prism.running_s == {"j": pytest.approx(27.0)}
    assert task.phases_started == prism.phases_started == 4


def test_phases_of_differing_memory_run_side_by_side_where_whole_tasks_cannot() -> None:
    # merge needs 3 GB: a task-level container is 1 vcore + 3 GB, and only one fits in 4 GB
    job = PhaseJob("j", 0.0, 2, 0, _profile((1, 1024, 10), (0.5, 3072, 10)))
    task = simulate([job], 1, NODE, "task")
    assert task.running_s == {"j": 40.0}
    prism = simulate([job], 1, NODE, "prism")
    # both maps at once (1 GB each); the merges one after the other: 11 -> 21, 21 -> 31
    assert prism.running_s == {"j": pytest.approx(31.0)}
    # the same work either way, done sooner: higher utilization
    used = 2 * (1 * 10 + 0.5 * 10)
    assert task.vcore_utilization == pytest.approx(used / (2 * 40))
    assert prism.vcore_utilization == pytest.approx(used / (2 * 31))


def test_synthetic_jobs_are_seeded_and_a_task_that_fits_nowhere_is_reported() -> None:
    assert synthetic_jobs(5, 7) == synthetic_jobs(5, 7)
    assert synthetic_jobs(5, 7) != synthetic_jobs(5, 8)
    huge = PhaseJob("big", 0.0, 1, 0, _profile((4, 1024, 1), (1, 1024, 1)))
    with pytest.raises(ValueError, match="never finished"):
        simulate([huge], 1, NODE, "task")


def _recorded(job_id: str, submit_ms: int, map_ms: int) -> MapReduceJob:
    jc = "org.apache.hadoop.mapreduce.JobCounter"
    tc = "org.apache.hadoop.mapreduce.TaskCounter"
    counters = {
        # one map on a 2-vcore, 1 GB container that used 1 vcore and 512 MB
        jc: {
            "MILLIS_MAPS": Counter(map_ms),
            "VCORES_MILLIS_MAPS": Counter(2 * map_ms),
            "MB_MILLIS_MAPS": Counter(1024 * map_ms),
        },
        tc: {
            "CPU_MILLISECONDS": Counter(map_ms, map_ms, 0),
            "PHYSICAL_MEMORY_BYTES": Counter(2**29, 2**29, 0),
        },
    }
    return MapReduceJob(
        job_id, "n", "q", "u", "SUCCEEDED", submit_ms, submit_ms, None, 1, 1, 0, 0,
        avg_map_ms=map_ms, counters=counters,
    )  # fmt: skip


def test_recorded_jobs_hold_their_containers_in_the_task_model_and_their_use_in_prism() -> None:
    unsubmitted = MapReduceJob("none", "n", "q", "u", "FAILED", None, None, None, 1, 0, 0, 0)
    jobs = recorded_jobs(
        [_recorded("b", 1_000_500, 10_000), _recorded("a", 1_000_000, 10_000), unsubmitted]
    )
    # oldest first, arrivals relative to the first submission; the job without one is left out
    assert [(j.id, j.arrival_s, j.maps, j.reduces) for j in jobs] == [
        ("a", 0.0, 1, 0),
        ("b", 0.5, 1, 0),
    ]
    assert jobs[0].profile.map == core.PhaseProfile(1.0, 512.0, 10.0)
    assert jobs[0].profile.merge.duration_s == 0.0
    assert jobs[0].containers == (core.Demand(2.0, 1024.0), core.Demand(1.0, 1024.0))
    # a 2-vcore node: the task model runs the two 2-vcore containers one after the other
    task = simulate(jobs, 1, NODE, "task")
    assert task.running_s == {"a": 10.0, "b": pytest.approx(19.5)}
    # PRISM holds the 1 vcore each map used: both maps run at once (a 0-10 s, b 0.5-10.5 s);
    # each ends with its empty merge phase, at the latest on the heartbeat 1 s later
    prism = simulate(jobs, 1, NODE, "prism")
    assert all(10.0 <= t <= 11.0 + 1e-9 for t in prism.running_s.values()), prism.running_s
    with pytest.raises(ValueError, match="job a: its map container"):
        check_fits(jobs, core.Demand(1, 4096))
