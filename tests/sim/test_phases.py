"""Phase-level simulation, hand-computed: task-level containers hold a task's peak for its whole
run; PRISM holds each phase's own demand, pauses tasks between phases and starts the next phase
when Algorithm 1 finds it worth it (heartbeats every second while tasks wait)."""

from __future__ import annotations

import pytest

from app.policies.prism import core
from app.sim.phases import PhaseJob, simulate, synthetic_jobs

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
