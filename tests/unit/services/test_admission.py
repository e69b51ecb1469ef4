"""The admission service on both engines against an in-memory RM.

Expected numbers are worked by hand from seed 004 Algorithms 3 to 6 and ``docs/policies.md``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import func, select

from app.db import jobs_repo, poll_writes, repo
from app.db.jobs_models import EstimatorObservation, Job, JobDecision
from app.db.models import Decision
from app.db.promise_history import job_keys, load_estimator
from app.db.session import transaction
from app.domain.model import AppRecord, NodeState, Resources
from app.jobs.rounds import AdmissionConfig
from app.policies.justice.core import EstimatorState, make_params
from app.policies.promise.estimator import EstimatorParams
from app.services.admission import AdmissionService, JobRejected, NewJob, ServiceOptions
from tests.conftest import Db
from tests.factories import app as app_record
from tests.unit.jobs.fakes import FakeRM

T0 = 1_700_000_000_000
# Apps submitted straight to YARN ran before the tests' first poll, so they are settled by then.
PAST = T0 - 600_000
RUN = {"kind": "application", "command": "sleep 1"}


@dataclass
class Clock:
    now: int = T0

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> int:
        self.now += int(seconds * 1000)
        return self.now


@dataclass
class Env:
    db: Db
    rm: FakeRM
    clock: Clock
    capacity: int = 8
    drop_threshold: int = 1000
    writes: bool = True
    policy: str = "justice"
    # These tests check what is learned, not when: apps count as settled at the next poll.
    # test_service_review.py covers the poller's grace with its production value.
    finished_grace_ms: int = 0

    def service(self) -> AdmissionService:
        """A fresh service on the same database (a restart)."""
        cfg = AdmissionConfig(
            make_params(self.policy, {"drop_threshold": self.drop_threshold}),
            self.capacity,
            "test",
            "enforce",
            self.finished_grace_ms,
        )
        options = ServiceOptions(rm_urls=("http://rm:8088",), writes_enabled=self.writes)
        return AdmissionService(
            self.rm, self.db.sessions, cfg, options, interval_s=1, clock=self.clock
        )


@pytest.fixture
def env(db: Db) -> Iterator[Env]:
    yield Env(db, FakeRM(), Clock())


def new_job(
    tasks: int, deadline_s: float, now: int, key: str | None = None, h: str = "h"
) -> NewJob:
    return NewJob(
        name=f"job-{tasks}",
        queue="root.deadline",
        deadline_ms=now + int(deadline_s * 1000),
        requested_tasks=tasks,
        input_bytes=None,
        block_size=None,
        run=RUN,
        tags=["team-a"],
        idempotency_key=key,
        request_hash=h,
    )


def submit(service: AdmissionService, tasks: int, deadline_s: float) -> tuple[Job, JobDecision]:
    now = service.clock()
    result = service.create_job(new_job(tasks, deadline_s, now), now)
    assert result.decision is not None
    return result.job, result.decision


async def reserve_unanswered(
    env: Env, fault: str, deadline_s: float = 1000
) -> tuple[AdmissionService, Job, str]:
    """A 4-task job admitted and its id reserved, whose ``POST /apps`` met ``fault`` (the fake
    RM's ``submit_fault``): the service, the job and the reserved id."""
    service = env.service()
    job, _ = submit(service, 4, deadline_s)
    env.rm.submit_fault = fault
    await service.act()
    reserved = load(env, job.id).app_id
    assert reserved is not None and load(env, job.id).state == "submitting"
    return service, job, reserved


def load(env: Env, job_id: str) -> Job:
    with env.db.sessions() as s:
        job = jobs_repo.get_job(s, job_id)
        assert job is not None
        return job


def actions(env: Env, job_id: str) -> list[str]:
    with env.db.sessions() as s:
        return [d.action for d in jobs_repo.decisions_of(s, job_id)]


def record_apps(env: Env, *apps: AppRecord) -> None:
    """What a good poll does: upsert the RM's view of the apps and stamp the poll's time."""
    with transaction(env.db.sessions) as s:
        cluster = repo.ensure_cluster(s, "test", ["http://rm:8088"], env.clock.now)
        repo.upsert_apps(s, cluster.id, list(apps), env.clock.now)
        poll_writes.mark_unlisted_gone(s, cluster.id, env.clock.now)
        cluster.last_good_poll_ms = env.clock.now


def estimator(env: Env) -> EstimatorState:
    with env.db.sessions() as s:
        row = jobs_repo.read_estimator(s)
        assert row is not None
        return EstimatorState.from_dict(row.state)


def tagged_app(
    app_id: str, deadline_after_s: int, vcore_s: int, elapsed_s: int, tasks: int
) -> AppRecord:
    rec = app_record(
        app_id,
        state="FINISHED",
        submitted_ms=PAST,
        finished_ms=PAST + elapsed_s * 1000,
        tags=(f"deadline:{PAST // 1000 + deadline_after_s}", f"tasks:{tasks}"),
        vcore_seconds=vcore_s,
    )
    return rec


async def teach_two(env: Env, service: AdmissionService) -> None:
    """Two on-time apps: 200 vcore-s, 100 s deadline, 4 tasks, 50 s -> minReqRate 0.5, last 1."""
    record_apps(env, tagged_app("application_9_0001", 100, 200, 50, 4))
    record_apps(env, tagged_app("application_9_0002", 100, 200, 50, 4))
    await service.run_once(env.clock.now)


# ---- admission -----------------------------------------------------------------------------------


def test_bootstrap_admits_whole_requests_and_queues_the_rest(env: Env) -> None:
    service = env.service()
    j1, d1 = submit(service, 4, 100)
    j2, d2 = submit(service, 6, 100)
    _, d3 = submit(service, 20, 100)
    _, d4 = submit(service, 2, 100)
    # Fewer than 2 completions: reqCpus = maxCpus = min(tasks, capacity 8); whole requests only.
    assert (d1.action, d1.cpus, j1.state, j1.granted_cpus) == ("admit", 4, "admitted", 4)
    assert (d2.action, d2.req_cpus, j2.state) == ("queue", 6, "queued")
    assert d2.reason == "request of 6 CPUs does not fit in 4 free"
    assert (d3.action, d3.req_cpus) == ("queue", 8)
    assert (d4.action, d4.cpus) == ("admit", 2)
    assert d4.numbers["free_cpus"] == 4 and d4.numbers["capacity"] == 8
    with env.db.sessions() as s:
        rounds = s.scalars(select(Decision).where(Decision.kind == "admission")).all()
    assert len(rounds) == 4
    assert all(r.policy == "justice" for r in rounds)
    assert d4.round_id == rounds[-1].id


def test_a_promise_round_records_the_arrivals_its_holds_are_priced_on(env: Env) -> None:
    # The crowd-out test allows for arrivals larger than any counted, one in (counted + 1):
    # each decision's inputs say how many the meter has counted and the largest need.
    service = env.service()
    service.set_policy("promise", {"am_containers": 0, "startup_s": 0.0}, env.clock.now)
    _, d1 = submit(service, 2, 100)
    _, d2 = submit(service, 6, 100)
    _, d3 = submit(service, 1, 100)
    # no history: each job's need is all its tasks (its bound is its whole deadline)
    assert (d1.numbers["arrivals_counted"], d1.numbers["arrival_need_top_vcores"]) == (1, 2)
    assert (d2.numbers["arrivals_counted"], d2.numbers["arrival_need_top_vcores"]) == (2, 6)
    assert (d3.numbers["arrivals_counted"], d3.numbers["arrival_need_top_vcores"]) == (3, 6)


async def test_admitted_job_is_submitted_once_with_tags_timeout_and_grant(env: Env) -> None:
    service = env.service()
    job, _ = submit(service, 4, 100)
    await service.act()
    await service.act()
    (app_id,) = env.rm.submits
    ctx = env.rm.contexts[app_id]
    assert ctx["application-tags"]["tag"][:2] == [f"sidecar-job:{job.id}", "deadline:1700000100"]
    env_vars = {e["key"]: e["value"] for e in ctx["am-container-spec"]["environment"]["entry"]}
    assert env_vars["SIDECAR_GRANTED_VCORES"] == "4"
    assert ctx["queue"] == "root.deadline"
    stored = load(env, job.id)
    assert (stored.state, stored.app_id, stored.timeout_set) == ("submitted", app_id, True)
    # 4 tasks <= drop_threshold: runs on past the deadline, YARN lifetime = deadline + 1 x 100 s.
    assert env.rm.timeouts[app_id] == T0 + 200_000
    assert actions(env, job.id) == ["admit", "reserve", "submit"]


async def test_large_jobs_get_a_lifetime_at_the_deadline(env: Env) -> None:
    env.drop_threshold = 3
    service = env.service()
    submit(service, 4, 100)
    await service.act()
    assert list(env.rm.timeouts.values()) == [T0 + 100_000]


async def test_restart_after_an_applied_but_unanswered_submit_adopts(env: Env) -> None:
    service = env.service()
    job, _ = submit(service, 4, 100)
    env.rm.submit_fault = "ambiguous"
    await service.act()
    assert load(env, job.id).state == "submitting"
    restarted = env.service()
    await restarted.act()
    stored = load(env, job.id)
    assert env.rm.submits == [stored.app_id]
    assert stored.state == "submitted"
    assert len(env.rm.tagged(f"sidecar-job:{job.id}")) == 1
    assert actions(env, job.id) == ["admit", "reserve", "adopt"]


async def test_restart_after_a_lost_submit_submits_the_reserved_id_once(env: Env) -> None:
    _, job, reserved = await reserve_unanswered(env, "lost", 100)
    await env.service().act()
    stored = load(env, job.id)
    assert stored.state == "submitted"
    # A fresh id could run next to the first if that POST /apps was only delayed.
    assert stored.app_id == reserved
    assert env.rm.submits == [reserved]
    assert actions(env, job.id) == ["admit", "reserve", "submit"]


async def test_unavailable_rm_leaves_the_job_admitted_until_it_answers(env: Env) -> None:
    service = env.service()
    job, _ = submit(service, 4, 100)
    env.rm.unavailable = True
    await service.act()
    assert load(env, job.id).state == "admitted"
    env.rm.unavailable = False
    await service.act()
    assert load(env, job.id).state == "submitted"


async def test_rejected_submission_fails_the_job_and_frees_its_cpus(env: Env) -> None:
    service = env.service()
    job, _ = submit(service, 8, 100)
    waiting, _ = submit(service, 8, 100)
    env.rm.reject_submit = "Requested more cores than configured max"
    await service.act()
    failed = load(env, job.id)
    assert failed.state == "failed"
    assert "Requested more cores" in failed.reason
    await service.run_once(env.clock.now)
    assert load(env, waiting.id).state == "failed"  # the RM refuses it too, but it was admitted
    assert actions(env, waiting.id)[:2] == ["queue", "admit"]


# ---- learning ------------------------------------------------------------------------------------


async def test_completion_teaches_once_and_admits_the_waiting_job(env: Env) -> None:
    service = env.service()
    j1, _ = submit(service, 4, 100)
    j2, d2 = submit(service, 6, 100)
    assert d2.action == "queue"
    await service.act()
    app_id = load(env, j1.id).app_id
    assert app_id is not None
    env.clock.advance(60)
    record_apps(env, env.rm.finish(app_id, at_ms=env.clock.now, vcore_seconds=200))
    await service.run_once(env.clock.now)
    await service.run_once(env.clock.now)
    done = load(env, j1.id)
    assert (done.state, done.met_deadline, done.vcore_seconds) == ("finished", True, 200)
    # TRACK_JOB: deadlineCPUs = 200/100 = 2; maxCPUs = min(4, 8) = 4; minReqRate = 0.5;
    # LastCPUFrac = 4 granted / 4 = 1; error = 0.5 - 1 = -0.5.
    est = estimator(env)
    assert (est.completed, est.min_frac, est.max_frac, est.last_frac) == (1, 0.5, 0.5, 1.0)
    assert est.errors == (-0.5,)
    with env.db.sessions() as s:
        n = s.scalar(select(func.count()).select_from(EstimatorObservation))
        decisions = jobs_repo.decisions_of(s, j2.id)
    assert n == 1
    assert decisions[1].action == "admit"
    assert decisions[1].numbers["trigger"] == "completion"
    assert load(env, j2.id).state == "submitted"


async def test_tagged_apps_teach_exactly_once_and_skips_are_recorded(env: Env) -> None:
    service = env.service()
    killed = app_record(
        "application_9_0003", state="KILLED", submitted_ms=PAST, finished_ms=PAST + 1000,
        tags=("deadline:1700000100",),
    )  # fmt: skip
    untagged = app_record("application_9_0004", state="FINISHED", finished_ms=PAST + 1000)
    record_apps(env, tagged_app("application_9_0001", 100, 200, 50, 4), killed, untagged)
    await service.run_once(env.clock.now)
    await service.run_once(env.clock.now)
    est = estimator(env)
    assert (est.completed, est.min_frac, est.last_frac) == (1, 0.5, 1.0)
    with env.db.sessions() as s:
        rows = {o.app_id: o for o in s.scalars(select(EstimatorObservation))}
    assert set(rows) == {"application_9_0001", "application_9_0003"}
    assert rows["application_9_0001"].learned and rows["application_9_0001"].source == "tagged"
    assert not rows["application_9_0003"].learned
    assert rows["application_9_0003"].reason.startswith("ended KILLED/KILLED")


async def test_after_two_completions_justice_grants_a_fraction(env: Env) -> None:
    service = env.service()
    await teach_two(env, service)
    # Alg. 4: last success -> (LastCPUFrac 1 + MinCPUFrac 0.5) / 2 = 0.75; Alg. 5: + mean error
    # -0.5 = 0.25, clamped up to MinCPUFrac 0.5. ESTIMATE_REQ: ceil(0.5 * min(8, 8)) = 4.
    _, decision = submit(service, 8, 100)
    assert (decision.action, decision.cpus, decision.fraction) == ("admit", 4, 0.5)
    assert decision.numbers["estimator"]["correction"] == -0.5


@pytest.mark.parametrize(("policy", "cpus"), [("justice", 2), ("pythia", 4)])
async def test_pythia_uses_the_largest_fraction_justice_corrects(
    env: Env, policy: str, cpus: int
) -> None:
    env.policy = policy
    service = env.service()
    # A: 200 vcore-s, 100 s, 4 tasks, 4 vcores on average -> minReqRate 0.5, last 1, error -0.5.
    # B: 100 vcore-s, 100 s, 4 tasks, 2 vcores on average -> minReqRate 0.25, last 0.5, error
    # -0.25. PYTHIA: CPUFrac = max = 0.5 -> ceil(0.5 * 8) = 4. Justice: (0.5 + 0.25) / 2 =
    # 0.375, + mean error -0.375 = 0, clamped to MinCPUFrac 0.25 -> ceil(0.25 * 8) = 2.
    record_apps(env, tagged_app("application_9_0001", 100, 200, 50, 4))
    await service.run_once(env.clock.now)
    record_apps(env, tagged_app("application_9_0002", 100, 100, 50, 4))
    await service.run_once(env.clock.now)
    _, decision = submit(service, 8, 100)
    assert (decision.action, decision.cpus, decision.policy) == ("admit", cpus, policy)


async def test_infeasible_and_expired_queued_jobs_are_dropped(env: Env) -> None:
    service = env.service()
    await teach_two(env, service)
    submit(service, 16, 100)  # 4 CPUs
    submit(service, 16, 100)  # 4 CPUs: the cluster is full
    tight, d = submit(service, 8, 100)
    short, _ = submit(service, 8, 10)
    assert (d.action, d.req_cpus) == ("queue", 4)
    env.clock.advance(60)
    await service.run_once(env.clock.now)
    # TTD = 100 - 60 = 40: fraction 0.5 * 100 / 40 = 1.25 -> ceil(1.25 * 8) = 10 > min(8, 8).
    dropped = load(env, tight.id)
    assert dropped.state == "dropped"
    assert dropped.reason == "needs 10 CPUs > min(tasks, capacity) = 8"
    assert load(env, short.id).reason == "time to deadline is gone"


# ---- kills and cancellation ----------------------------------------------------------------------


async def test_large_violators_are_killed_small_ones_run_on(env: Env) -> None:
    env.drop_threshold = 3
    service = env.service()
    big, _ = submit(service, 4, 10)
    small, _ = submit(service, 2, 10)
    await service.act()
    env.clock.advance(20)
    await service.run_once(env.clock.now)
    killed = load(env, big.id)
    assert killed.state == "killed"
    assert env.rm.kills == [killed.app_id]
    assert actions(env, big.id)[:4] == ["admit", "reserve", "submit", "kill"]
    with env.db.sessions() as s:
        kill = next(d for d in jobs_repo.decisions_of(s, big.id) if d.action == "kill")
    assert kill.reason == "past its deadline by 10s with 4 tasks > drop_threshold 3"
    assert load(env, small.id).state == "submitted"
    # A killed app's truncated vcoreSeconds do not teach the estimator ...
    assert estimator(env).completed == 0
    # ... but once the RM reports it ended, they are kept as a lower bound of the job's work,
    # which Promise's estimator learns as such: 60 vcore-s, less its 1-vcore AM's 19.9 s
    assert killed.app_id is not None
    record_apps(
        env,
        app_record(
            killed.app_id, state="KILLED", submitted_ms=T0, finished_ms=env.clock.now,
            vcore_seconds=60,
        ),
    )  # fmt: skip
    await service.run_once(env.clock.now)
    assert estimator(env).completed == 0
    with env.db.sessions() as s:
        obs = s.get_one(EstimatorObservation, killed.app_id)
        keys = job_keys(load(env, big.id))
        est = load_estimator(s, EstimatorParams(min_samples=1), capacity=8)
    assert (obs.learned, obs.censored, obs.tasks, obs.comp_time) == (False, True, 4, 60.0)
    assert obs.reason.endswith("kept as a lower bound of its work")
    entry = est.entries()[keys.signature]
    assert (entry["samples"], entry["killed"]) == (1, 1)
    # the only run did not end: nothing bounds the next one from it, as if it had no history
    assert entry["task_s_upper"] is None and entry["ratio_upper"] is None
    assert est.estimate(keys, 4, 10.0, 4).source == "bootstrap"


async def test_cancel_is_idempotent_and_kills_the_app(env: Env) -> None:
    service = env.service()
    running, _ = submit(service, 8, 100)
    queued, _ = submit(service, 8, 100)
    await service.act()
    cancelled = service.cancel_job(queued.id, env.clock.now)
    assert cancelled is not None and cancelled.state == "cancelled"
    assert service.cancel_job(running.id, env.clock.now).state == "cancelling"  # type: ignore[union-attr]
    await service.finish_cancel(running.id, 5)
    stored = load(env, running.id)
    assert (stored.state, stored.app_state) == ("cancelled", "KILLED")
    assert env.rm.kills == [stored.app_id]
    assert service.cancel_job(running.id, env.clock.now).state == "cancelled"  # type: ignore[union-attr]
    assert env.rm.kills == [stored.app_id]
    assert service.cancel_job("nope", env.clock.now) is None


async def test_cancel_of_an_ended_job_conflicts(env: Env) -> None:
    service = env.service()
    job, _ = submit(service, 8, 10)
    env.clock.advance(5)
    with transaction(env.db.sessions) as s:
        jobs_repo.transition(s, job.id, ["admitted"], env.clock.now, state="finished")
    with pytest.raises(JobRejected) as err:
        service.cancel_job(job.id, env.clock.now)
    assert err.value.status == 409


# ---- requests ------------------------------------------------------------------------------------


def test_idempotency_key_replays_or_conflicts(env: Env) -> None:
    service = env.service()
    first = service.create_job(new_job(4, 100, T0, key="k1", h="a"), T0)
    again = service.create_job(new_job(4, 100, T0 + 5, key="k1", h="a"), T0 + 5)
    assert (first.created, again.created, again.job.id) == (True, False, first.job.id)
    assert again.decision is not None and again.decision.action == "admit"
    with pytest.raises(JobRejected) as err:
        service.create_job(new_job(5, 100, T0, key="k1", h="b"), T0)
    assert (err.value.status, err.value.field) == (409, "idempotency_key")
    with env.db.sessions() as s:
        assert s.scalar(select(func.count()).select_from(Job)) == 1


def test_observe_mode_submits_nothing(env: Env) -> None:
    env.writes = False
    with pytest.raises(JobRejected) as err:
        submit(env.service(), 4, 100)
    assert err.value.field == "mode"


def test_unknown_capacity_queues_with_the_reason(env: Env) -> None:
    env.capacity = 0
    job, decision = submit(env.service(), 4, 100)
    assert (decision.action, job.state) == ("queue", "queued")
    assert "capacity unknown" in decision.reason


def test_capacity_from_the_latest_poll(env: Env) -> None:
    env.capacity = 0
    node = NodeState("n1:1", "n1", "/r", "RUNNING", (), Resources(6, 8192), Resources(0, 0), 0)
    lost = NodeState("n2:1", "n2", "/r", "LOST", (), Resources(16, 8192), Resources(0, 0), 0)
    with transaction(env.db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], T0).id
        repo.add_node_samples(s, cid, [node, lost], T0)
    _, decision = submit(env.service(), 10, 100)
    assert (decision.action, decision.cpus, decision.numbers["capacity"]) == ("admit", 6, 6)
