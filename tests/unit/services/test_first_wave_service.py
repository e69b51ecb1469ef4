"""The admission service times a running job's first wave from the RM's container list and
Promise ends the job once its waves cannot finish in time (``app/jobs/first_wave.py``,
``app/policies/promise/core.py`` "First wave"), on both engines against an in-memory RM."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from app.db import jobs_repo, promise_history
from app.domain.model import AttemptContainers, LiveContainer
from app.services.admission import AdmissionService
from tests.conftest import Db
from tests.factories import job_row
from tests.unit.jobs.fakes import FakeRM
from tests.unit.services.test_admission import Clock, Env, load, new_job, record_apps

# No history, no AM booked, no start-up prior: a 16-task job with a 100 s deadline is bounded
# by the whole deadline on the 8 vcores, 50 s a task, and promised 8 vcores for 2 waves.
PROMISE = {"am_containers": 0, "startup_s": 0.0}


@pytest.fixture
def env(db: Db) -> Iterator[Env]:
    yield Env(db, FakeRM(), Clock())


def _admitted(env: Env, service: AdmissionService, *, task_containers: bool, tasks: int) -> str:
    """A job admitted on 8 vcores."""
    now = env.clock.now
    run = {"kind": "application", "command": "sleep 1", "task_containers": task_containers}
    result = service.create_job(replace(new_job(tasks, 100, now), run=run), now)
    assert result.job.granted_cpus == 8, result.decision
    return result.job.id


def _attempt(app_id: str, ages_s: list[float]) -> AttemptContainers:
    prefix = app_id.replace("application_", "container_") + "_01"
    containers = [LiveContainer(f"{prefix}_000001", int(max(ages_s) * 1000) + 3000)]
    containers += [
        LiveContainer(f"{prefix}_{i + 2:06d}", int(age * 1000)) for i, age in enumerate(ages_s)
    ]
    return AttemptContainers(
        f"appattempt_{app_id[12:]}_000001", containers[0].container_id, tuple(containers)
    )


async def _start(
    env: Env, task_containers: bool, tasks: int = 16
) -> tuple[AdmissionService, str, str]:
    """The job (16 tasks: 2 waves) admitted, submitted and RUNNING in the RM's listing."""
    service = env.service()
    service.set_policy("promise", PROMISE, env.clock.now)
    job_id = _admitted(env, service, task_containers=task_containers, tasks=tasks)
    await service.act()
    app_id = load(env, job_id).app_id
    assert app_id is not None
    record_apps(env, replace(env.rm.apps_by_id[app_id], state="RUNNING"))
    return service, job_id, app_id


async def test_a_job_whose_first_wave_shows_a_miss_is_killed_before_its_deadline(env: Env) -> None:
    service, job_id, app_id = await _start(env, task_containers=True)
    # 40 s in, its 8 tasks have run 38 s without one ending: 2 x 38 = 76 s, it may still make it
    env.clock.advance(40)
    env.rm.attempts[app_id] = _attempt(app_id, [38.0] * 7 + [38.5])
    await service.run_once(env.clock.now)
    job = load(env, job_id)
    assert (job.state, job.task_floor_s) == ("submitted", 38.0)
    # 55 s in, 53 s without one ending: 2 waves end 106 s after admission at the earliest
    env.clock.advance(15)
    env.rm.attempts[app_id] = _attempt(app_id, [53.0] * 8)
    record_apps(env, replace(env.rm.apps_by_id[app_id], state="RUNNING"))
    await service.run_once(env.clock.now)
    job = load(env, job_id)
    assert job.state == "killed" and env.rm.kills == [app_id]
    with env.db.sessions() as s:
        kill = next(d for d in jobs_repo.decisions_of(s, job_id) if d.action == "kill")
    assert "first tasks ran 53s without ending: 2 waves" in kill.reason


async def test_a_bound_stays_once_a_task_has_ended(env: Env) -> None:
    service, job_id, app_id = await _start(env, task_containers=True)
    env.clock.advance(40)
    env.rm.attempts[app_id] = _attempt(app_id, [38.0] * 8)
    await service.run_once(env.clock.now)
    # one task ended (its number is gone) and a new one started: nothing new is learned, and
    # the young container does not lower the bound
    env.clock.advance(15)
    attempt = _attempt(app_id, [53.0] * 8)
    young = LiveContainer(attempt.containers[1].container_id[:-6] + "000010", 2000)
    env.rm.attempts[app_id] = replace(
        attempt, containers=(*attempt.containers[:2], *attempt.containers[3:], young)
    )
    record_apps(env, replace(env.rm.apps_by_id[app_id], state="RUNNING"))
    await service.run_once(env.clock.now)
    job = load(env, job_id)
    assert (job.state, job.task_floor_s) == ("submitted", 38.0)
    # and the bound being final, its containers are not read again
    reads = len(env.rm.attempt_reads)
    env.clock.advance(10)
    await service.run_once(env.clock.now)
    assert len(env.rm.attempt_reads) == reads == 2


async def test_a_job_of_one_wave_is_not_timed(env: Env) -> None:
    # 8 tasks on 8 vcores: its tasks end no earlier than its first ones, which only its deadline
    # can show to be late
    service, job_id, app_id = await _start(env, task_containers=True, tasks=8)
    env.clock.advance(55)
    env.rm.attempts[app_id] = _attempt(app_id, [53.0] * 8)
    await service.run_once(env.clock.now)
    assert env.rm.attempt_reads == []
    assert load(env, job_id).task_floor_s is None


async def test_a_job_that_does_not_run_one_task_per_container_is_not_timed(env: Env) -> None:
    service, job_id, app_id = await _start(env, task_containers=False)
    env.clock.advance(55)
    env.rm.attempts[app_id] = _attempt(app_id, [53.0] * 8)
    await service.run_once(env.clock.now)
    job = load(env, job_id)
    assert (job.state, job.task_floor_s) == ("submitted", None)
    assert env.rm.kills == []


def test_a_queued_job_says_whether_its_first_wave_is_timed(env: Env) -> None:
    # Promise prices a try's miss up to its first wave's verdict only where the sidecar times
    # that wave: a run that says each task has a container of its own. The others (Spark, the
    # sleep template, a run that says false) show a miss only at their deadline.
    runs = {
        "mapreduce": {"kind": "application", "task_containers": True},
        "spark": {"kind": "application"},
        "declined": {"kind": "application", "task_containers": False},
    }
    now = env.clock.now
    with env.db.sessions() as s:
        for name, run in runs.items():
            job = job_row(
                name, state="queued", submitted_ms=now, tasks=16, deadline_s=100.0, run=run
            )
            jobs_repo.add_job(s, job)
        s.commit()
    with env.db.sessions() as s:
        waiting, running = promise_history.admission_jobs(s)
    assert running == []
    assert {j.id: j.timed for j in waiting} == {
        "mapreduce": True,
        "spark": False,
        "declined": False,
    }


def _progress(env: Env, app_id: str, percent: float) -> None:
    """The RM reports the app RUNNING at ``percent`` progress."""
    env.rm.apps_by_id[app_id] = replace(
        env.rm.apps_by_id[app_id], state="RUNNING", progress=percent
    )


async def test_a_job_whose_progress_shows_a_miss_is_killed_before_its_deadline(env: Env) -> None:
    # 8 tasks on 8 vcores: one wave, which its tasks' durations cannot show late before its
    # deadline; its progress can
    service, job_id, app_id = await _start(env, task_containers=True, tasks=8)
    admitted = env.clock.now
    env.clock.advance(20)
    _progress(env, app_id, 10.0)
    await service.run_once(env.clock.now)
    job = load(env, job_id)
    assert job.state == "submitted"
    assert (job.progress_first, job.progress_first_ms) == (0.1, env.clock.now)
    # 10 s later it reads 20 %: 1 % a second, so it ends 80 s from now, 110 s after its
    # admission, after its deadline (100 s)
    env.clock.advance(10)
    _progress(env, app_id, 20.0)
    await service.run_once(env.clock.now)
    job = load(env, job_id)
    assert (job.progress_last, job.progress_last_ms) == (0.2, admitted + 30_000)
    assert job.state == "killed" and env.rm.kills == [app_id]
    with env.db.sessions() as s:
        kill = next(d for d in jobs_repo.decisions_of(s, job_id) if d.action == "kill")
    assert "its progress ends it at now+80.0s, after its deadline now+70.0s" in kill.reason


async def test_a_job_whose_progress_ends_it_in_time_runs_on(env: Env) -> None:
    service, job_id, app_id = await _start(env, task_containers=True, tasks=8)
    env.clock.advance(20)
    _progress(env, app_id, 10.0)
    await service.run_once(env.clock.now)
    # 10 % to 40 % in 10 s: it ends 20 s from now, 50 s after its admission
    env.clock.advance(10)
    _progress(env, app_id, 40.0)
    await service.run_once(env.clock.now)
    job = load(env, job_id)
    assert job.state == "submitted" and env.rm.kills == []
    assert (job.progress_first, job.progress_last) == (0.1, 0.4)


@pytest.mark.parametrize(
    ("task_containers", "progress_s"),
    # a Spark run's progress is its own measure, not its tasks' share done; and the rule off
    [(False, 20.0), (True, 0.0)],
)
async def test_progress_is_read_only_for_tasks_one_per_container_with_the_rule_on(
    env: Env, task_containers: bool, progress_s: float
) -> None:
    service, job_id, app_id = await _start(env, task_containers=task_containers, tasks=8)
    service.set_policy("promise", {**PROMISE, "progress_s": progress_s}, env.clock.now)
    for percent in (10.0, 20.0):
        env.clock.advance(10)
        _progress(env, app_id, percent)
        await service.run_once(env.clock.now)
    job = load(env, job_id)
    assert (job.state, job.progress_first, job.progress_last) == ("submitted", None, None)
