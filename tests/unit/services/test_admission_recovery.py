"""Admission service recovery on both engines against an in-memory RM.

1. An ambiguous ``POST /apps`` (``docs/yarn.md`` 4.2: the client cannot tell whether it was applied)
   must not lead to a second app for the same job.
2. A job whose app the RM dropped (``yarn.resourcemanager.max-completed-applications``) must not
   hold its CPUs forever.
3. Learning (seed 004, Algorithm 3) uses ``vcoreSeconds`` only after the poller's grace re-read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import select

from app.db import jobs_repo
from app.db.jobs_models import EstimatorObservation
from app.domain.model import FINISHED_GRACE_MS, AppRecord
from app.services.admission import LANDING_GRACE_MS
from app.yarn.errors import RMRejected, RMUnavailable
from tests.conftest import Db
from tests.unit.jobs.fakes import FakeRM, _record
from tests.unit.services.test_admission import (
    Clock,
    Env,
    actions,
    load,
    record_apps,
    reserve_unanswered,
    submit,
)


class SlowRM(FakeRM):
    """POST /apps times out on the client side; the RM applies it a moment later (after the
    sidecar's next tag query), as a request queued behind a GC pause would be."""

    in_flight: list[dict[str, Any]] | None = None

    async def submit_application(self, context: Mapping[str, Any]) -> None:
        if self.submit_fault == "late":
            self.submit_fault = None
            self.in_flight = [dict(context)]
            raise RMUnavailable("POST /apps may or may not have been applied: read timeout")
        await super().submit_application(context)

    async def apps(self, *, tags: Sequence[str] | None = None) -> tuple[AppRecord, ...]:
        seen = await super().apps(tags=tags)
        self.land()
        return seen

    async def kill_application(
        self, app_id: str, diagnostics: str = "", wait_s: float = 30.0
    ) -> str:
        try:
            return await super().kill_application(app_id, diagnostics, wait_s)
        finally:
            self.land()  # lands just after the RM said it does not know the id

    def land(self) -> None:
        for ctx in self.in_flight or []:
            app_id = str(ctx["application-id"])
            self.submits.append(app_id)
            self.apps_by_id[app_id] = _record(app_id, ctx, self.now_ms)
        self.in_flight = None


class RecoveringRM(FakeRM):
    """An RM that refuses a re-submit of a known id instead of ignoring it; ``blind`` tag
    queries list nothing (the app is known by id all along)."""

    blind: int = 0

    async def apps(self, *, tags: Sequence[str] | None = None) -> tuple[AppRecord, ...]:
        if tags and self.blind > 0:
            self.blind -= 1
            return ()
        return await super().apps(tags=tags)

    async def submit_application(self, context: Mapping[str, Any]) -> None:
        app_id = str(context["application-id"])
        if app_id in self.apps_by_id:
            raise RMRejected(400, f"Application with id '{app_id}' is already present!")
        await super().submit_application(context)


@pytest.fixture
def env(db: Db) -> Iterator[Env]:
    yield Env(db, FakeRM(), Clock())


def running_tagged(env: Env, job_id: str) -> list[str]:
    return [a.app_id for a in env.rm.tagged(f"sidecar-job:{job_id}") if not a.is_finished]


# ---- 1. one job, one app -------------------------------------------------------------------------


async def test_ambiguous_submit_is_not_resubmitted_under_a_fresh_id(db: Db) -> None:
    env = Env(db, SlowRM(), Clock())
    service = env.service()
    job, _ = submit(service, 4, 100)
    env.rm.submit_fault = "late"
    await service.act()  # reserve X, POST /apps X times out
    reserved = load(env, job.id).app_id
    assert load(env, job.id).state == "submitting"
    for _ in range(4):  # no tagged app yet -> X again; the first POST lands meanwhile
        await service.act()
    stored = load(env, job.id)
    assert (stored.state, stored.app_id) == ("submitted", reserved)
    assert running_tagged(env, job.id) == [reserved]


async def test_already_present_answer_to_a_resubmit_counts_as_submitted(db: Db) -> None:
    env = Env(db, RecoveringRM(), Clock())
    service = env.service()
    job, _ = submit(service, 4, 100)
    env.rm.submit_fault = "ambiguous"  # applied, answer lost
    await service.act()
    env.rm.blind = 1  # the tag query misses it: the re-submit meets the known id
    await service.act()
    stored = load(env, job.id)
    assert stored.state == "submitted"
    assert actions(env, job.id) == ["admit", "reserve", "submit"]


async def test_already_present_answer_for_an_app_without_the_jobs_tag_fails_the_job(
    db: Db,
) -> None:
    # Not the job's app: someone submitted the reserved id first, untagged, in the job's queue.
    env = Env(db, RecoveringRM(), Clock())
    service, job, reserved = await reserve_unanswered(env, "ambiguous", 100)
    env.rm.apps_by_id[reserved] = replace(env.rm.apps_by_id[reserved], tags=(), user="mallory")
    await service.act()
    stored = load(env, job.id)
    assert stored.state == "failed" and "mallory" in stored.reason
    assert actions(env, job.id) == ["admit", "reserve", "fail"]


async def test_adopting_kills_and_records_duplicates(env: Env) -> None:
    service, job, first = await reserve_unanswered(env, "ambiguous", 100)
    ctx = {**env.rm.contexts[first], "application-id": "application_1_0099"}
    env.rm.now_ms += 1000
    await env.rm.submit_application(ctx)  # a second app with the same job tag
    await service.act()
    stored = load(env, job.id)
    assert (stored.state, stored.app_id) == ("submitted", first)
    assert env.rm.kills == ["application_1_0099"]
    assert running_tagged(env, job.id) == [first]
    with env.db.sessions() as s:
        adopt = [d for d in jobs_repo.decisions_of(s, job.id) if d.action == "adopt"]
    assert adopt[0].numbers["killed_duplicates"] == ["application_1_0099"]


async def test_a_polled_duplicate_of_a_submitted_job_is_killed(env: Env) -> None:
    service = env.service()
    job, _ = submit(service, 4, 100)
    await service.act()
    mine = load(env, job.id).app_id
    assert mine is not None
    ctx = {**env.rm.contexts[mine], "application-id": "application_1_0099"}
    await env.rm.submit_application(ctx)
    record_apps(env, *env.rm.apps_by_id.values())  # the poller lists both
    await service.act()
    assert env.rm.kills == ["application_1_0099"]
    assert running_tagged(env, job.id) == [mine]
    assert actions(env, job.id)[-1] == "kill-stray"


async def test_cancel_waits_for_a_submit_that_may_still_land(db: Db) -> None:
    env = Env(db, SlowRM(), Clock())
    service = env.service()
    job, _ = submit(service, 4, 100)
    env.rm.submit_fault = "late"
    await service.act()
    reserved = load(env, job.id).app_id
    service.cancel_job(job.id, env.clock.now)
    await service.act()  # kill: 404, then the POST lands
    assert load(env, job.id).state == "cancelling"
    await service.act()  # the id is known now: killed, job cancelled from its final record
    assert load(env, job.id).state == "cancelled"
    assert running_tagged(env, job.id) == []
    assert env.rm.kills == [reserved]


async def test_cancel_of_a_reserved_id_ends_after_the_landing_grace(env: Env) -> None:
    service = env.service()
    job, _ = submit(service, 4, 100)
    env.rm.submit_fault = "lost"
    await service.act()
    service.cancel_job(job.id, env.clock.now)
    await service.act()
    assert load(env, job.id).state == "cancelling"
    env.clock.advance(LANDING_GRACE_MS / 1000)
    await service.act()
    assert load(env, job.id).state == "cancelled"
    assert env.rm.submits == []


async def test_an_app_landing_after_its_job_ended_is_killed(env: Env) -> None:
    service = env.service()
    job, _ = submit(service, 4, 100)
    env.rm.submit_fault = "lost"
    await service.act()
    reserved = load(env, job.id).app_id
    assert reserved is not None
    service.cancel_job(job.id, env.clock.now)
    env.clock.advance(LANDING_GRACE_MS / 1000)
    await service.act()
    assert load(env, job.id).state == "cancelled"
    ctx = {**_context_of(job.id), "application-id": reserved}
    await env.rm.submit_application(ctx)  # very late landing
    record_apps(env, env.rm.apps_by_id[reserved])
    await service.act()
    assert env.rm.kills == [reserved]
    assert running_tagged(env, job.id) == []


def _context_of(job_id: str) -> dict[str, Any]:
    return {"application-tags": {"tag": [f"sidecar-job:{job_id}"]}, "queue": "root.deadline"}


# ---- 2. apps the RM forgot -----------------------------------------------------------------------


async def test_job_whose_app_the_rm_forgot_does_not_hold_cpus_forever(env: Env) -> None:
    service = env.service()
    job, _ = submit(service, 8, 100)  # takes all 8 CPUs
    await service.act()
    app_id = load(env, job.id).app_id
    assert app_id is not None
    record_apps(env, env.rm.apps_by_id[app_id])  # the poller saw it ACCEPTED
    # The app ended and the RM evicted it before the next poll.
    del env.rm.apps_by_id[app_id]
    env.clock.advance(600)
    record_apps(env)  # a good poll that no longer lists it
    await service.run_once(env.clock.now)
    stored = load(env, job.id)
    assert stored.state == "failed"
    assert "unknown to the RM" in stored.reason
    assert actions(env, job.id)[-1] == "fail"
    _, decision = submit(service, 1, 100)
    assert decision.action == "admit"
    with env.db.sessions() as s:
        assert s.get(EstimatorObservation, app_id) is None  # nothing learned from it


async def test_an_unlisted_app_the_rm_still_knows_ends_its_job(env: Env) -> None:
    service = env.service()
    job, _ = submit(service, 4, 100)
    await service.act()
    app_id = load(env, job.id).app_id
    assert app_id is not None
    record_apps(env, env.rm.apps_by_id[app_id])
    env.clock.advance(600)
    env.rm.finish(app_id, at_ms=env.clock.now - 500_000, vcore_seconds=200)
    record_apps(env)  # finished before the poller's window: not listed
    await service.run_once(env.clock.now)
    stored = load(env, job.id)
    assert (stored.state, stored.vcore_seconds) == ("finished", 200)


async def test_no_good_poll_no_lookup(env: Env) -> None:
    service = env.service()
    job, _ = submit(service, 4, 100)
    await service.act()
    del env.rm.apps_by_id[str(load(env, job.id).app_id)]
    await service.run_once(env.clock.now)
    assert load(env, job.id).state == "submitted"


# ---- 3. learning waits for the corrected vcoreSeconds --------------------------------------------


async def test_learning_waits_for_the_corrected_vcore_seconds(db: Db) -> None:
    env = Env(db, FakeRM(), Clock(), finished_grace_ms=FINISHED_GRACE_MS)
    service = env.service()
    job, _ = submit(service, 4, 100)
    await service.act()
    app_id = load(env, job.id).app_id
    assert app_id is not None
    env.clock.advance(50)
    first = env.rm.finish(app_id, at_ms=env.clock.now, vcore_seconds=100)
    record_apps(env, first)  # right after FINISHED: the AM container is still exiting
    await service.run_once(env.clock.now)
    assert load(env, job.id).state == "finished"  # its CPUs are free at once
    env.clock.advance(FINISHED_GRACE_MS / 1000 - 1)
    record_apps(env, replace(first, vcore_seconds=130))  # the grace re-read corrects it
    await service.run_once(env.clock.now)
    with db.sessions() as s:
        assert s.get(EstimatorObservation, app_id) is None  # grace not over yet
    env.clock.advance(1)
    record_apps(env)
    await service.run_once(env.clock.now)
    with db.sessions() as s:
        obs = s.scalar(select(EstimatorObservation).where(EstimatorObservation.app_id == app_id))
    assert obs is not None and obs.comp_time == 130
    assert load(env, job.id).vcore_seconds == 130
