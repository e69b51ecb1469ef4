"""Jobs whose app the RM lost before any poll listed it (``app.services.admission.reaper``,
"apps the RM forgot"): once the poller has had ``UNLISTED_GRACE_MS`` to list the app, it is
looked up by id, and the job fails and frees its CPUs only when the RM does not know it."""

from __future__ import annotations

import pytest

from app.db.jobs_models import EstimatorObservation
from app.db.models import Application
from app.services.admission.reaper import UNLISTED_GRACE_MS
from tests.conftest import Db
from tests.unit.jobs.fakes import FakeRM
from tests.unit.services.test_admission import Clock, Env, actions, load, record_apps, submit

GRACE_S = UNLISTED_GRACE_MS / 1000


@pytest.fixture
def env(db: Db) -> Env:
    return Env(db, FakeRM(), Clock())


async def _submitted(env: Env, tasks: int) -> tuple[str, str]:
    """A job submitted to YARN and its app id."""
    service = env.service()
    job, _ = submit(service, tasks, 100)
    await service.act()
    stored = load(env, job.id)
    assert stored.state == "submitted" and stored.app_id is not None
    return job.id, stored.app_id


async def test_a_job_whose_app_the_rm_lost_before_any_poll_fails_and_frees_its_cpus(
    env: Env,
) -> None:
    job_id, app_id = await _submitted(env, 8)  # 8 tasks, within drop_threshold: all 8 CPUs
    # The RM failed over before it saved the app (or restarted without recovery).
    del env.rm.apps_by_id[app_id]
    env.clock.advance(GRACE_S)
    record_apps(env)  # a good poll, started a grace after the submission, lists nothing
    service = env.service()
    await service.run_once(env.clock.now)
    stored = load(env, job_id)
    assert stored.state == "failed"
    assert stored.reason == (
        f"application {app_id} unknown to the RM: it dropped the app before any poll listed it"
    )
    assert actions(env, job_id)[-1] == "fail"
    _, decision = submit(service, 1, 100)
    assert decision.action == "admit"
    with env.db.sessions() as s:
        assert s.get(EstimatorObservation, app_id) is None  # nothing learned from it


async def test_an_app_is_not_looked_up_before_a_poll_has_had_the_grace_to_list_it(
    env: Env,
) -> None:
    job_id, app_id = await _submitted(env, 4)
    del env.rm.apps_by_id[app_id]
    service = env.service()
    env.clock.advance(GRACE_S - 1)
    record_apps(env)  # started within the grace: the app may simply not be listed yet
    await service.run_once(env.clock.now)
    assert load(env, job_id).state == "submitted"
    env.clock.advance(60)
    await service.run_once(env.clock.now)  # time passed, but no poll since that counts
    assert load(env, job_id).state == "submitted"
    record_apps(env)
    await service.run_once(env.clock.now)
    assert load(env, job_id).state == "failed"


async def test_an_app_that_ended_before_any_poll_listed_it_ends_its_job(env: Env) -> None:
    job_id, app_id = await _submitted(env, 4)
    env.rm.finish(app_id, at_ms=env.clock.now + 5_000, vcore_seconds=20)
    env.clock.advance(GRACE_S)
    record_apps(env)  # it ended before the poller's finished window: never listed
    await env.service().run_once(env.clock.now)
    stored = load(env, job_id)
    assert (stored.state, stored.vcore_seconds) == ("finished", 20)


async def test_an_app_listed_once_as_finished_and_evicted_since_finishes_its_job(
    env: Env,
) -> None:
    job_id, app_id = await _submitted(env, 4)
    env.clock.advance(5)
    record_apps(env, env.rm.finish(app_id, at_ms=env.clock.now, vcore_seconds=20))
    del env.rm.apps_by_id[app_id]  # a busy RM's max-completed-applications evicted it
    env.clock.advance(GRACE_S)
    record_apps(env)
    await env.service().run_once(env.clock.now)
    assert load(env, job_id).state == "finished"


async def test_a_live_app_the_poller_has_not_listed_is_left_to_it(env: Env) -> None:
    job_id, app_id = await _submitted(env, 4)
    service = env.service()
    env.clock.advance(GRACE_S)
    record_apps(env)  # the RM holds it, yet this poll missed it
    await service.run_once(env.clock.now)
    assert load(env, job_id).state == "submitted"
    with env.db.sessions() as s:
        # No row the poller's memory would not know (it could never mark that one gone).
        assert s.get(Application, app_id) is None
    del env.rm.apps_by_id[app_id]  # then the RM loses it: the next lookup fails the job
    env.clock.advance(10)
    record_apps(env)
    await service.run_once(env.clock.now)
    assert load(env, job_id).state == "failed"
