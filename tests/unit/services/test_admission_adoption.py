"""Whose apps and whose name the deadline-job lifecycle acts on, on both engines against an
in-memory RM.

1. Adoption trusts only the id a job reserved: an app anyone tags ``sidecar-job:<id>`` is never
   taken for the job, and never makes the sidecar kill the job's own app.
2. A deposed leader neither re-submits a reserved id nor kills the app a new leader adopted.
3. A follower serving ``DELETE /jobs/{id}`` leaves the kill to the leader.
4. Only a requester's own decisions carry the request's principal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

import pytest

from app.auth.principal import Principal, Role, acting_as, current
from app.db import jobs_repo, leader_repo
from app.db.jobs_models import Job
from app.db.session import transaction
from app.services.admission import AdmissionService
from tests.conftest import Db
from tests.unit.jobs.fakes import FakeRM
from tests.unit.services.test_admission import (
    Clock,
    Env,
    actions,
    load,
    new_job,
    record_apps,
    reserve_unanswered,
    submit,
)

ALICE = Principal("alice", Role.SUBMITTER, "alice-ci")
BOB = Principal("bob", Role.SUBMITTER, "bob-ci")


async def plant(
    env: Env, job_id: str, app_id: str, queue: str = "root.mallory", tags: list[str] | None = None
) -> None:
    """Another YARN user submits an app of her own, tagged with a sidecar job's id unless
    ``tags`` says otherwise."""
    ctx = {
        "application-id": app_id,
        "queue": queue,
        "application-name": "evil",
        "application-tags": {"tag": [f"sidecar-job:{job_id}"] if tags is None else tags},
    }
    await env.rm.submit_application(ctx)
    env.rm.apps_by_id[app_id] = replace(env.rm.apps_by_id[app_id], user="mallory")
    env.rm.submits.remove(app_id)  # not the sidecar's submission


# ---- 1. adoption -------------------------------------------------------------------------------


async def test_an_admitted_job_submits_its_own_app_past_one_planted_with_its_tag(db: Db) -> None:
    env = Env(db, FakeRM(), Clock())
    service = env.service()
    big, _ = submit(service, 8, 1000)
    await service.act()
    victim, decision = submit(service, 4, 1000)
    assert decision.action == "queue"
    await plant(env, victim.id, "application_666_0001")
    env.clock.advance(60)
    big_app = load(env, big.id).app_id
    assert big_app is not None
    record_apps(env, env.rm.finish(big_app, at_ms=env.clock.now, vcore_seconds=100))
    await service.run_once(env.clock.now)  # the victim is admitted and submitted
    stored = load(env, victim.id)
    assert stored.state == "submitted"
    assert stored.app_id != "application_666_0001"
    assert env.rm.submits == [big_app, stored.app_id]
    assert env.rm.apps_by_id[stored.app_id].queue == "root.deadline"
    assert actions(env, victim.id) == ["queue", "admit", "reserve", "submit"]
    # Once polled, the planted app is a stray of the submitted job; the job's app runs on.
    record_apps(env, *env.rm.apps_by_id.values())
    await service.act()
    assert env.rm.kills == ["application_666_0001"]
    assert not env.rm.apps_by_id[stored.app_id].is_finished


async def test_a_submitting_job_adopts_its_reserved_id_not_an_older_planted_app(db: Db) -> None:
    env = Env(db, FakeRM(), Clock())
    service = env.service()
    victim, _ = submit(service, 4, 1000)
    await plant(env, victim.id, "application_666_0001")
    planted = env.rm.apps_by_id.pop("application_666_0001")  # not yet visible to the tag query
    env.rm.now_ms += 1000
    env.rm.submit_fault = "ambiguous"  # the job's POST /apps lands, its answer is lost
    await service.act()
    reserved = load(env, victim.id).app_id
    assert reserved is not None and load(env, victim.id).state == "submitting"
    env.rm.apps_by_id[planted.app_id] = planted
    await service.act()  # the tag query lists both; the planted one is the older
    stored = load(env, victim.id)
    assert (stored.state, stored.app_id) == ("submitted", reserved)
    assert env.rm.kills == [planted.app_id]
    assert not env.rm.apps_by_id[reserved].is_finished
    assert actions(env, victim.id) == ["admit", "reserve", "adopt"]


async def test_a_reserved_id_held_by_an_app_in_another_queue_is_not_adopted(db: Db) -> None:
    env = Env(db, FakeRM(), Clock())
    service, job, reserved = await reserve_unanswered(env, "lost")
    await plant(env, job.id, reserved)  # someone submitted under the id GET /jobs showed
    await service.act()
    stored = load(env, job.id)
    assert stored.state == "failed"
    assert "root.mallory" in stored.reason and "not adopted" in stored.reason
    # Only the job's own app or an impostor carries both its id and its tag.
    assert env.rm.submits == [] and env.rm.kills == [reserved]
    assert actions(env, job.id) == ["admit", "reserve", "fail"]


@pytest.mark.parametrize("queue", ["root.mallory", "root.deadline"])
async def test_a_reserved_id_taken_untagged_fails_the_job_instead_of_being_its_app(
    db: Db, queue: str
) -> None:
    # The tag query does not list an untagged app, so the job posts its reserved id again and
    # the RM answers success for the id it already holds.
    env = Env(db, FakeRM(), Clock())
    service, job, reserved = await reserve_unanswered(env, "lost")
    await plant(env, job.id, reserved, queue, tags=[])
    await service.act()
    stored = load(env, job.id)
    assert stored.state == "failed"
    assert f"queue {queue}" in stored.reason and "mallory" in stored.reason
    assert env.rm.submits == [] and env.rm.kills == []
    assert actions(env, job.id) == ["admit", "reserve", "fail"]


async def test_a_submitted_app_read_back_as_the_jobs_own_is_marked_submitted(db: Db) -> None:
    env = Env(db, FakeRM(), Clock())
    service, job, reserved = await reserve_unanswered(env, "lost")
    await service.act()  # the same id again, now landing
    stored = load(env, job.id)
    assert (stored.state, stored.app_id) == ("submitted", reserved)
    assert env.rm.submits == [reserved]
    assert actions(env, job.id) == ["admit", "reserve", "submit"]


class MappingRM(FakeRM):
    """A CapacityScheduler whose queue mapping places every app in ``root.mapped.<user>``, run
    as the user the submission names (``yarn-sidecar`` without one)."""

    async def submit_application(self, context: Mapping[str, Any]) -> None:
        app_id = str(context["application-id"])
        try:
            await super().submit_application(context)
        finally:  # also when the answer is lost
            if (app := self.apps_by_id.get(app_id)) is not None:
                user = str(context.get("run_as") or "yarn-sidecar")
                self.apps_by_id[app_id] = replace(app, queue=f"root.mapped.{user}", user=user)


def submit_as(service: AdmissionService, user: str | None) -> Job:
    now = service.clock()
    new = new_job(4, 1000, now)
    if user is not None:
        new = replace(new, run={**new.run, "run_as": user})
    return service.create_job(new, now).job


@pytest.mark.parametrize("fault", [None, "ambiguous"])
async def test_the_jobs_own_app_a_queue_mapping_placed_elsewhere_is_the_jobs(
    db: Db, fault: str | None
) -> None:
    # None: read back after its POST; ambiguous: adopted through the tag query after a restart.
    env = Env(db, MappingRM(), Clock())
    service = env.service()
    job = submit_as(service, "alice")
    env.rm.submit_fault = fault
    await service.act()
    if fault:
        await env.service().act()
    stored = load(env, job.id)
    assert stored.state == "submitted" and stored.app_id is not None
    assert env.rm.apps_by_id[stored.app_id].queue == "root.mapped.alice"
    assert env.rm.kills == []


async def test_a_tagged_app_in_another_queue_as_another_user_is_killed_not_adopted(
    db: Db,
) -> None:
    env = Env(db, MappingRM(), Clock())
    service = env.service()
    job = submit_as(service, None)  # runs as the sidecar: a mapping cannot be told apart
    await service.act()
    stored = load(env, job.id)
    assert stored.state == "failed" and "root.mapped.yarn-sidecar" in stored.reason
    assert stored.app_id is not None and env.rm.kills == [stored.app_id]
    assert env.rm.apps_by_id[stored.app_id].is_finished


# ---- 2. a deposed leader -----------------------------------------------------------------------


class HookRM(FakeRM):
    """An RM whose answer to ``POST /apps`` is held while ``during_submit`` runs."""

    during_submit: Callable[[], Awaitable[None]] | None = None

    async def submit_application(self, context: Mapping[str, Any]) -> None:
        await super().submit_application(context)
        hook, self.during_submit = self.during_submit, None
        if hook is not None:
            await hook()


def take_lead(db: Db, who: str, now_ms: int) -> int:
    with transaction(db.sessions) as session:
        return leader_repo.take_lead(session, who, now_ms)


async def reserved_by_a(db: Db, env: Env) -> tuple[Any, Any, str, str | None]:
    """Sidecars ``a`` (leading) and ``b``; ``a`` reserved a job's id and its POST was lost."""
    a, b = env.service(), env.service()
    epoch_a = take_lead(db, "a", env.clock.now)
    a.epoch = lambda: epoch_a
    job, _ = submit(a, 4, 1000)
    env.rm.submit_fault = "lost"
    await a.act()
    return a, b, job.id, load(env, job.id).app_id


async def test_a_deposed_leader_does_not_submit_a_reserved_id_again(db: Db) -> None:
    env = Env(db, FakeRM(), Clock())
    a, b, job_id, reserved = await reserved_by_a(db, env)
    epoch_b = take_lead(db, "b", env.clock.now)
    b.epoch = lambda: epoch_b
    await a.act()  # fenced: it no longer leads
    assert env.rm.submits == []
    assert load(env, job_id).state == "submitting"
    await b.act()
    stored = load(env, job_id)
    assert (stored.state, stored.app_id) == ("submitted", reserved)
    assert env.rm.submits == [reserved] and env.rm.kills == []


async def test_a_new_leader_adopting_the_app_mid_submit_keeps_it_running(db: Db) -> None:
    env = Env(db, HookRM(), Clock())
    a, b, job_id, reserved = await reserved_by_a(db, env)
    assert reserved is not None

    async def b_takes_over() -> None:
        # After A's fence check passed and its POST /apps landed: B leads and adopts the app.
        epoch_b = take_lead(db, "b", env.clock.now)
        b.epoch = lambda: epoch_b
        await b.act()

    env.rm.during_submit = b_takes_over
    await a.act()
    stored = load(env, job_id)
    assert (stored.state, stored.app_id) == ("submitted", reserved)
    assert env.rm.kills == []
    assert not env.rm.apps_by_id[reserved].is_finished
    assert actions(env, job_id) == ["admit", "reserve", "adopt"]


async def test_a_submit_that_loses_to_a_cancel_kills_its_app(db: Db) -> None:
    env = Env(db, HookRM(), Clock())
    service = env.service()
    job, _ = submit(service, 4, 1000)

    async def cancel() -> None:
        service.cancel_job(job.id, env.clock.now)

    env.rm.during_submit = cancel
    await service.act()
    app_id = load(env, job.id).app_id
    assert app_id is not None and env.rm.kills[0] == app_id


# ---- 3. a follower -----------------------------------------------------------------------------


async def test_a_follower_leaves_the_kill_of_a_cancelled_job_to_the_leader(db: Db) -> None:
    env = Env(db, FakeRM(), Clock())
    leader, follower = env.service(), env.service()
    follower.may_act = lambda: False
    follower.eager = True
    job, _ = submit(leader, 4, 1000)
    await leader.act()
    app_id = load(env, job.id).app_id
    cancelled = follower.cancel_job(job.id, env.clock.now)
    assert cancelled is not None and cancelled.state == "cancelling"
    await follower.finish_cancel(job.id, 15.0)  # what DELETE /jobs/{id} does next
    assert env.rm.kills == [] and load(env, job.id).state == "cancelling"
    await leader.act()
    assert env.rm.kills == [app_id] and load(env, job.id).state == "cancelled"


# ---- 4. principals -----------------------------------------------------------------------------


def principals(env: Env, job_id: str) -> list[tuple[str, str | None]]:
    with env.db.sessions() as session:
        return [(d.action, d.principal) for d in jobs_repo.decisions_of(session, job_id)]


async def test_a_request_records_only_its_own_jobs_decisions_under_its_principal(db: Db) -> None:
    env = Env(db, FakeRM(), Clock(), drop_threshold=3)
    service = env.service()
    now = env.clock.now
    with acting_as(BOB):
        bob = service.create_job(new_job(4, 10, now), now).job
    await service.act()
    env.clock.advance(30)  # bob's 4-task job is past its deadline: the next round kills it
    now = env.clock.now
    with acting_as(ALICE):
        alice = service.create_job(new_job(1, 100, now), now).job
        await service.act()  # an act pass run on alice's request
    assert principals(env, bob.id) == [
        ("admit", "bob (token bob-ci)"),
        ("reserve", None),
        ("submit", None),
        ("kill", None),
        ("finish", None),
    ]
    assert principals(env, alice.id) == [
        ("admit", "alice (token alice-ci)"),
        ("reserve", None),
        ("submit", None),
    ]


async def test_a_kicked_act_pass_does_not_run_as_the_request_that_kicked_it(db: Db) -> None:
    env = Env(db, FakeRM(), Clock())
    service = env.service()
    service.eager = True
    seen: list[Principal | None] = []

    async def act() -> None:
        seen.append(current())

    service.act = act  # type: ignore[method-assign]
    with acting_as(ALICE):
        service.kick()
        assert current() == ALICE
    assert service._kicked is not None
    await service._kicked
    assert seen == [None]
