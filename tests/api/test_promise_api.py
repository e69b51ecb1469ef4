"""The Promise admission policy behind ``/jobs`` and ``/estimator`` (``app/policies/promise``):
ETA in the answer to ``POST /jobs`` and in ``GET /jobs/{id}``, an honest refusal with the
earliest feasible finish, AM containers booked, and per-signature estimates rebuilt from the
database identically after a restart. The RM refuses connections: what is tested is admission.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from app.db import repo
from app.db.jobs_models import EstimatorObservation, Job
from app.db.models import Application, Cluster, ClusterSample
from app.db.promise_history import job_keys, load_estimator
from app.db.session import transaction
from app.jobs import promise_round
from app.jobs.promise_round import room
from app.main import create_app
from app.policies.promise import core
from app.policies.promise.estimator import Estimator, EstimatorParams
from app.settings import Settings
from tests.conftest import Db
from tests.factories import queue

RUN = {"kind": "application", "command": "sleep 5"}


def _refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


@asynccontextmanager
async def _client(
    db: Db, capacity: int = 8, startup_s: float = 10.0, apps: list[FastAPI] | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        database_url=db.url,
        cluster_name="test",
        deadline_capacity_vcores=capacity,
        admission_policy="promise",
        promise_startup_s=startup_s,
    )
    app = create_app(settings, run_loops=False, rm_transport=httpx.MockTransport(_refuse))
    if apps is not None:
        apps.append(app)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
            yield client


def body(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": "report", "deadline": 120, "requested_tasks": 4, "run": RUN}
    base.update(kw)
    return base


async def test_post_answers_with_an_eta_and_books_the_am_container(db: Db) -> None:
    async with _client(db) as client:
        first = (await client.post("/jobs", json=body())).json()
        # No history: the bound is the whole 120 s deadline on all 4 tasks; 4 + 1 AM of 8 vcores
        assert (first["state"], first["granted_cpus"]) == ("admitted", 4)
        eta = first["eta"]
        assert eta["finish_s"] - eta["start_s"] == pytest.approx(120, abs=0.01)
        second = (await client.post("/jobs", json=body(name="other"))).json()
        # 3 vcores left: 4 tasks + 1 AM do not fit; with no history it needs its whole window,
        # so it can start no later than its submission, and the first job ends too late even
        # at its central estimate: it waits for room to be tried, and says for what.
        assert second["state"] == "queued"
        waits_for = second["eta"]["waits_for"]
        assert waits_for == "vcores free enough to try it (running jobs end too late)"
        submitted = dt.datetime.fromisoformat(second["submitted_at"]).timestamp()
        assert second["eta"]["latest_start_s"] == pytest.approx(submitted, abs=0.01)
        # Read now, the plan already says it cannot make it and when it could have finished:
        # after the first job's bounded end, another 120 s.
        detail = (await client.get(f"/jobs/{second['id']}")).json()
        assert detail["eta"]["action"] == "drop"
        assert detail["eta"]["earliest_finish_s"] > eta["finish_s"]
        est = (await client.get("/estimator")).json()
        assert est["policy"] == "promise" and est["admitted_floor_vcores"] == 5
        # no sidecar job has finished: the start-up prior holds until 19 are known (at 0.95)
        assert est["startup"] == {"prior_s": 10.0, "seen": 0, "needed": 19, "prior_holds": True}


async def test_a_job_that_cannot_finish_is_refused_with_its_earliest_finish(db: Db) -> None:
    async with _client(db) as client:
        # No history: the 120 s deadline less the 10 s start-up prior, at full parallelism on
        # the 8 vcores: 110 * 8 vcore-s. 20 tasks on at most 7 containers (8 less the AM) take 3
        # waves of 110 * 8 / 20 = 44 s after the start-up: 142 s > the 120 s deadline, even on
        # the empty cluster.
        r = (await client.post("/jobs", json=body(requested_tasks=20))).json()
        assert r["state"] == "dropped"
        deadline_at = dt.datetime.fromisoformat(r["deadline_at"]).timestamp()
        assert r["eta"]["earliest_finish_s"] - deadline_at == pytest.approx(22.0, abs=0.01)
        assert "cannot finish by its deadline" in r["decision"]["reason"]


def _history(db: Db) -> None:
    """Six finished runs of two recurring jobs, learned as the learning pass stores them."""
    with db.sessions.begin() as s:
        cluster = Cluster(name="test", rm_urls="http://rm", first_seen_ms=0)
        s.add(cluster)
        s.flush()
        for i, (name, work) in enumerate(
            [(f"etl-2024-01-0{d}", 400.0) for d in (1, 2, 3)]
            + [(f"report-{d}", 50.0) for d in (1, 2, 3)]
        ):
            _learned(
                s,
                Application(
                    app_id=f"application_1_{i:04d}", cluster_id=cluster.id, user="al",
                    queue="root.deadline", name=name, app_type="MAPREDUCE", tags=",",
                    state="FINISHED", final_status="SUCCEEDED", elapsed_ms=100_000,
                    vcore_seconds=int(work), first_seen_ms=0, updated_ms=0,
                ),
                i, tasks=4, deadline_s=100.0,
            )  # fmt: skip


def _learned(s: Any, app: Application, i: int, *, tasks: int, deadline_s: float | None) -> None:
    """A finished app and the learning pass's observation of it (the app's whole work)."""
    s.add(app)
    s.flush()
    s.add(
        EstimatorObservation(
            app_id=app.app_id, source="tagged", observed_ms=1000 + i, learned=True, tasks=tasks,
            deadline_s=deadline_s, comp_time=float(app.vcore_seconds), cpus=tasks, success=True,
        )
    )  # fmt: skip


def _plain_runs(db: Db, name: str, *, tasks: int, deadline_s: float, **app: Any) -> None:
    """Three finished plain-YARN apps of user ``al`` (``name-0`` to ``name-2``) with the
    learning pass's observations of them."""
    with db.sessions.begin() as s:
        cluster = Cluster(name="test", rm_urls="http://rm", first_seen_ms=0)
        s.add(cluster)
        s.flush()
        for i in range(3):
            _learned(
                s,
                Application(
                    app_id=f"application_1_{i:04d}", cluster_id=cluster.id, user="al",
                    name=f"{name}-{i}", app_type="YARN", tags=",", state="FINISHED",
                    final_status="SUCCEEDED", first_seen_ms=0, updated_ms=0, **app,
                ),
                i, tasks=tasks, deadline_s=deadline_s,
            )  # fmt: skip


async def test_estimator_is_per_signature_and_the_same_after_a_restart(db: Db) -> None:
    _history(db)
    async with _client(db) as client:
        before = (await client.get("/estimator")).json()
    async with _client(db) as client:  # a new process over the same database
        after = (await client.get("/estimator")).json()
    sigs = before["signatures"]
    etl = next(k for k in sigs if k.startswith("n:etl-<date>"))
    report = next(k for k in sigs if k.startswith("n:report-<n>"))
    assert sigs[etl]["samples"] == 3 and sigs[report]["samples"] == 3
    # ratio = work / (100 s * 4): 1.0 for etl, 0.125 for report; the user key holds both
    assert sigs[etl]["ratio_upper"] == pytest.approx(1.0)
    assert sigs[report]["ratio_upper"] == pytest.approx(0.125)
    assert sigs["u:al|t:mapreduce"]["samples"] == 6
    # every run after the first had a bound (the cluster's ratios, 1.0 from etl's runs) and none
    # exceeded it
    err = before["prediction_error"]
    assert (err["bounds_checked"], err["above_bound"]) == (5, 0.0)
    assert after["signatures"] == sigs and after["prediction_error"] == before["prediction_error"]


async def test_reads_of_queued_jobs_share_the_latest_plan_until_it_is_an_interval_old(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    _history(db)
    # 20 runs of profile:report (one 50 s task, given 400 s each), as many as a 0.95 quantile
    # of its own ratios needs: they bound the jobs below, which then wait with slack
    with db.sessions.begin() as s:
        cluster_id = s.scalars(select(Cluster.id)).one()
        for i in range(6, 26):
            _learned(
                s,
                Application(
                    app_id=f"application_1_{i:04d}", cluster_id=cluster_id, user="al",
                    queue="root.deadline", name=f"report-{i}", app_type="YARN",
                    tags=",profile:report,", state="FINISHED", final_status="SUCCEEDED",
                    elapsed_ms=50_000, vcore_seconds=50, first_seen_ms=0, updated_ms=0,
                ),
                i, tasks=1, deadline_s=400.0,
            )  # fmt: skip
    plan = promise_round.plan_queued
    made: list[int] = []

    def counted(*args: Any) -> Any:
        made.append(1)
        return plan(*args)

    monkeypatch.setattr(promise_round, "plan_queued", counted)
    apps: list[FastAPI] = []
    async with _client(db, startup_s=0.0, apps=apps) as client:
        # Its bound is its whole window on 7 tasks (no start-up prior): with its AM, all 8 vcores.
        etl = await client.post("/jobs", json=body(name="etl-2024-03-01", requested_tasks=7))
        assert (etl.json()["state"], etl.json()["granted_cpus"]) == ("admitted", 7)
        # One-task jobs of 50 s with an hour to go: they wait, with latest starts well ahead.
        one_task = {"deadline": 3600, "requested_tasks": 1, "tags": ["profile:report"]}
        posted = [
            (await client.post("/jobs", json=body(name=f"report-{n}", **one_task))).json()
            for n in (4, 5)
        ]
        assert [p["state"] for p in posted] == ["queued", "queued"]
        # The second submission's round planned both: reading them plans nothing more.
        details = [(await client.get(f"/jobs/{p['id']}")).json() for p in posted]
        assert made == []
        assert [d["eta"]["action"] for d in details] == ["queue", "queue"]
        assert details[1]["eta"] == posted[1]["eta"]
        # Once that plan is older than an admission interval, the next read plans anew.
        apps[0].state.sidecar.admission.eta_plans.max_age_ms = -1
        again = (await client.get(f"/jobs/{posted[0]['id']}")).json()
        assert made == [1] and again["eta"]["action"] == "queue"
        assert again["eta"]["latest_start_s"] == pytest.approx(
            details[0]["eta"]["latest_start_s"], abs=1.0
        )


def test_room_is_the_guarantee_or_what_the_other_queues_leave_capped_at_the_maximum() -> None:
    # 20 % of 8 vcores is a guarantee of 1 (rounded down); 6 used elsewhere leave 2.
    assert room(8, 20.0, 100.0, 6) == 2
    # Others hold all 8: the guarantee still stands (YARN hands it over as their containers end).
    assert room(8, 20.0, 100.0, 8) == 1
    # An idle cluster lends everything up to the queue's maximum capacity (50 % of 8).
    assert room(8, 20.0, 50.0, 0) == 4
    # 25 % of 8 is exactly 2, not 1.99...
    assert room(8, 25.0, 100.0, 8) == 2


def _poll(db: Db, taken_ms: int, etl_vcores: int) -> None:
    """One poll's worth of samples: 8 vcores, root.etl using ``etl_vcores``, root.deadline 20 %."""
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], taken_ms).id
        qs = [
            queue("root", capacity=100, leaf=False),
            queue("root.etl", capacity=80, used_vcores=etl_vcores),
            queue("root.deadline", capacity=20),
        ]
        ids = repo.upsert_queues(s, cid, qs, taken_ms)
        repo.add_queue_samples(s, ids, qs, taken_ms)
        s.add(
            ClusterSample(
                cluster_id=cid,
                taken_ms=taken_ms,
                nodes=1,
                running_nodes=1,
                capability_vcores=8,
                capability_mb=8192,
                used_vcores=etl_vcores,
                used_mb=etl_vcores * 1024,
                num_containers=etl_vcores,
            )
        )


async def test_admission_books_only_what_the_deadline_queue_can_hold_now(db: Db) -> None:
    """Another queue holds 6 of 8 vcores: one 1-task job (1 + its AM) fits in the 2 left; the
    next waits in the sidecar instead of sitting ACCEPTED in YARN; once the other queue's
    containers are gone, the next job is admitted at once."""
    now_ms = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
    _poll(db, now_ms - 1000, etl_vcores=6)
    async with _client(db, capacity=0) as client:
        first = (await client.post("/jobs", json=body(requested_tasks=1, deadline=600))).json()
        assert (first["state"], first["granted_cpus"]) == ("admitted", 1)
        second = (
            await client.post("/jobs", json=body(name="next", requested_tasks=1, deadline=600))
        ).json()
        assert second["state"] == "queued", second
        _poll(db, now_ms, etl_vcores=0)
        third = (
            await client.post("/jobs", json=body(name="third", requested_tasks=1, deadline=600))
        ).json()
        assert third["state"] == "admitted", third


async def test_plain_jobs_whose_am_waited_do_not_make_a_later_job_look_infeasible(db: Db) -> None:
    """Three plain-YARN apps in the deadline queue waited 100 s for their 2 task containers of
    8 s with their AM running: 116 vcore-s each, nearly twice their 30 s x 2 vcores. Their
    tasks' work is 16 vcore-s; an unrelated 1-task job with 300 s is admitted on that."""
    _plain_runs(
        db, "burst", tasks=2, deadline_s=30.0, queue="deadline", started_ms=0, launched_ms=1_000,
        finished_ms=101_000, elapsed_ms=101_000, vcore_seconds=116,
    )  # fmt: skip
    async with _client(db) as client:
        sigs = (await client.get("/estimator")).json()["signatures"]
        # the queue's key (a job names root.deadline, YARN reports the leaf) learned 16 / 60
        assert sigs["q:deadline"]["ratio_upper"] == pytest.approx(16 / 60)
        r = await client.post("/jobs", json=body(name="small", requested_tasks=1, deadline=300))
        job = r.json()
        assert job["state"] == "admitted", job["decision"]["reason"]
        # after the 10 s start-up prior (no sidecar job has taught a start-up yet)
        assert job["eta"]["finish_s"] - job["eta"]["start_s"] == pytest.approx(10 + 300 * 16 / 60)


def test_a_sidecar_job_teaches_its_own_signature_its_tasks_work_and_its_start_up(db: Db) -> None:
    with db.sessions.begin() as s:
        cluster = Cluster(name="test", rm_urls="http://rm", first_seen_ms=0)
        s.add(cluster)
        s.flush()
        # admitted at 10 s on 2 of its 4 tasks; YARN ran its 2-vcore AM from 14 s to 40 s:
        # 52 of its 92 vcore-s are the AM's, the tasks' 40 take 2 waves of 10 s, so the
        # 30 s from admission to finish hold 10 s of start-up
        job = Job(
            id="j1", name="nightly-7", queue="root.deadline", state="finished",
            requested_tasks=4, deadline_s=60.0, deadline_ms=70_000, submitted_ms=9_000,
            request_hash="h", granted_cpus=2, admitted_ms=10_000, app_id="application_1_0001",
            updated_ms=0, owner="al",
            run={"kind": "application", "command": "x", "resource": {"vcores": 2}},
        )  # fmt: skip
        s.add(job)
        s.add(
            Application(
                app_id="application_1_0001", cluster_id=cluster.id, user="al",
                queue="deadline", name="nightly-7", app_type="YARN", tags=",",
                state="FINISHED", final_status="SUCCEEDED", started_ms=11_000,
                launched_ms=14_000, finished_ms=40_000, elapsed_ms=29_000, vcore_seconds=92,
                first_seen_ms=0, updated_ms=0,
            )
        )  # fmt: skip
        s.flush()
        s.add(
            EstimatorObservation(
                app_id="application_1_0001", job_id="j1", source="job", observed_ms=50_000,
                learned=True, tasks=4, deadline_s=60.0, comp_time=92.0, cpus=2, success=True,
            )
        )  # fmt: skip
    with db.sessions() as s:
        keys = job_keys(s.get_one(Job, "j1"))
        est = load_estimator(s, EstimatorParams(min_samples=1), capacity=8)
    entry = est.entries()[keys.signature]
    assert keys.signature == "n:nightly-<n>|u:al|t:application|q:deadline"
    assert entry["task_s_median"] == pytest.approx(10.0)
    assert entry["overhead_s_upper"] == pytest.approx(10.0)
    assert est.estimate(keys, 4, 60.0, 4).overhead_s == pytest.approx(10.0)


async def test_a_one_task_job_whose_central_estimate_fits_is_tried_not_refused(db: Db) -> None:
    # Five one-task runs of profile:probe (no deadline: task seconds only): 10, 11, 12, 13, 20 s.
    # The bound (0.95 quantile) is 20 s, the central estimate 12 s; no start-up is assumed (the
    # prior is another test's), so the numbers below are the tasks' own.
    with db.sessions.begin() as s:
        cluster = Cluster(name="test", rm_urls="http://rm", first_seen_ms=0)
        s.add(cluster)
        s.flush()
        for i, work in enumerate((10, 11, 12, 13, 20)):
            _learned(
                s,
                Application(
                    app_id=f"application_1_{i:04d}", cluster_id=cluster.id, user="al",
                    queue="root.deadline", name=f"probe-{i}", app_type="YARN",
                    tags=",profile:probe,", state="FINISHED", final_status="SUCCEEDED",
                    elapsed_ms=work * 1000, vcore_seconds=work, first_seen_ms=0, updated_ms=0,
                ),
                i, tasks=1, deadline_s=None,
            )  # fmt: skip
    async with _client(db, startup_s=0.0) as client:
        tagged = {"requested_tasks": 1, "tags": ["profile:probe"]}
        r = (await client.post("/jobs", json=body(name="probe", deadline=15, **tagged))).json()
        assert (r["state"], r["granted_cpus"]) == ("admitted", 1)
        assert r["decision"]["reason"].startswith("tried on 1 vcores")
        assert r["eta"]["finish_s"] - r["eta"]["start_s"] == pytest.approx(12.0, abs=0.01)
        # Below the central estimate it is refused, with the earliest finish its bound allows.
        r = (await client.post("/jobs", json=body(name="probe", deadline=11, **tagged))).json()
        assert r["state"] == "dropped"
        deadline_at = dt.datetime.fromisoformat(r["deadline_at"]).timestamp()
        assert r["eta"]["earliest_finish_s"] - deadline_at == pytest.approx(9.0, abs=0.05)


async def test_a_one_task_job_of_a_new_signature_is_explored_when_others_runs_refuse_it(
    db: Db,
) -> None:
    # Three plain-YARN runs of other jobs each needed 1.3 times their 30 s deadline: the
    # cluster's ratios, the only history a new signature can borrow, say no job can make it.
    _plain_runs(
        db, "tight", tasks=1, deadline_s=30.0, queue="root.deadline", elapsed_ms=39_000,
        vcore_seconds=39,
    )  # fmt: skip
    async with _client(db, startup_s=0.0) as client:
        one = (await client.post("/jobs", json=body(name="fresh", requested_tasks=1))).json()
        # refused, it would teach nothing, and neither would every new signature after it
        assert (one["state"], one["granted_cpus"]) == ("admitted", 1), one["decision"]
        assert one["decision"]["reason"].startswith("explored on 1 vcores")
        # its ETA is its central estimate: 1.3 x its 120 s deadline on one vcore
        assert one["eta"]["finish_s"] - one["eta"]["start_s"] == pytest.approx(156.0, abs=0.01)
        two = (await client.post("/jobs", json=body(name="fresh", requested_tasks=2))).json()
        assert two["state"] == "dropped"  # more than learn_cpus vcores: its bound decides


def _counted_learning(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count every run the estimator learns from here on."""
    learned: list[int] = []
    learn = Estimator.learn

    def counted(self: Estimator, outcome: Any) -> Estimator:
        learned.append(1)
        return learn(self, outcome)

    monkeypatch.setattr(Estimator, "learn", counted)
    return learned


def _batch_runs(db: Db) -> None:
    """Three runs that used a fifth of their window: a new job's bound leaves it room to wait."""
    _plain_runs(
        db, "batch", tasks=4, deadline_s=100.0, queue="root.deadline", elapsed_ms=20_000,
        vcore_seconds=80,
    )  # fmt: skip


async def _posted_while_loading(
    client: httpx.AsyncClient, service: Any, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """A submission answered while ``service`` reads the whole history (held up meanwhile)."""
    learn = Estimator.learn
    loading, release = threading.Event(), threading.Event()

    def held_up(self: Estimator, outcome: Any) -> Estimator:
        loading.set()
        assert release.wait(30)
        return learn(self, outcome)

    monkeypatch.setattr(Estimator, "learn", held_up)
    loader = threading.Thread(target=service.warm)  # what a tick does before its round
    loader.start()
    try:
        assert loading.wait(30)
        # The load holds the estimator: the submission does not wait for it.
        posted: dict[str, Any] = (await client.post("/jobs", json=body(name="report-7"))).json()
        assert posted["state"] == "queued"
        assert posted["decision"]["reason"] == promise_round.LOADING
        assert posted["eta"] is None
        during = (await client.get("/estimator")).json()
        assert (during["loading"], during["signatures"]) == (True, {})
    finally:
        release.set()
        loader.join()
    monkeypatch.setattr(Estimator, "learn", learn)
    return posted


def _planned(monkeypatch: pytest.MonkeyPatch) -> list[core.WaitingJob]:
    """Every waiting job a round plans from here on."""
    planned: list[core.WaitingJob] = []
    admit = core.admit

    def seen(waiting: list[core.WaitingJob], *args: Any) -> list[core.Decision]:
        planned.extend(waiting)
        return admit(waiting, *args)

    monkeypatch.setattr(core, "admit", seen)
    return planned


async def test_a_submission_while_the_history_loads_is_answered_queued_at_once(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    _batch_runs(db)
    apps: list[FastAPI] = []
    async with _client(db, startup_s=0.0, apps=apps) as client:
        service = apps[0].state.sidecar.admission
        posted = await _posted_while_loading(client, service, monkeypatch)
        learned = _counted_learning(monkeypatch)
        planned = _planned(monkeypatch)
        # The round after the load decides it, learning nothing again: each run once, as a
        # restart's full read would have it. It plans it as at its first round: the wait was
        # the sidecar's, not a bet on the job (``risk.after_wait``).
        await asyncio.to_thread(service._round, service.clock(), "tick")
        assert [j.first_round for j in planned if j.id == posted["id"]] == [True]
        job = (await client.get(f"/jobs/{posted['id']}")).json()
        assert job["state"] == "admitted", [d["reason"] for d in job["decisions"]]
        after = (await client.get("/estimator")).json()
        assert learned == [] and after["loading"] is False
        batch = next(v for k, v in after["signatures"].items() if k.startswith("n:batch-<n>"))
        assert batch["samples"] == 3


async def test_a_job_answered_while_loading_is_still_new_to_the_next_process(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The process that answered it stops before any round plans it: the next one (a restart,
    # or another replica) plans it as at its first round too.
    _batch_runs(db)
    apps: list[FastAPI] = []
    async with _client(db, startup_s=0.0, apps=apps) as client:
        posted = await _posted_while_loading(client, apps[0].state.sidecar.admission, monkeypatch)
        queued = (await client.get(f"/jobs/{posted['id']}")).json()
        assert (queued["state"], queued["reason"]) == ("queued", promise_round.LOADING)
    planned = _planned(monkeypatch)
    async with _client(db, startup_s=0.0, apps=apps) as client:
        service = apps[1].state.sidecar.admission
        await asyncio.to_thread(service.warm)
        await asyncio.to_thread(service._round, service.clock(), "tick")
        assert [j.first_round for j in planned if j.id == posted["id"]] == [True]
        job = (await client.get(f"/jobs/{posted['id']}")).json()
        assert job["state"] == "admitted" and job["reason"] != promise_round.LOADING


async def test_a_follower_keeps_the_estimator_up_to_date_and_reads_do_not_relearn(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    _history(db)
    apps: list[FastAPI] = []
    async with _client(db, startup_s=0.0, apps=apps) as client:
        service = apps[0].state.sidecar.admission
        learned = _counted_learning(monkeypatch)
        service.gate = lambda: False  # not the leader: no round, no YARN action
        await service.tick()
        assert service._warming is not None
        service._warming.join(30)  # its own thread: the tick does not wait for it
        assert len(learned) == 6 and service.last_round is None
        # GET /estimator reads the estimator admission plans with: nothing learned again
        first = (await client.get("/estimator")).json()
        second = (await client.get("/estimator")).json()
        assert len(learned) == 6
        assert first["signatures"] == second["signatures"] and len(first["signatures"]) > 2
        # a submission's round learns nothing either
        posted = (await client.post("/jobs", json=body(name="report-9"))).json()
        assert posted["state"] == "admitted" and len(learned) == 6


async def test_once_the_loop_runs_a_round_asks_for_the_history_read_and_does_not_do_it(
    db: Db,
) -> None:
    _batch_runs(db)
    apps: list[FastAPI] = []
    async with _client(db, startup_s=0.0, apps=apps) as client:
        service = apps[0].state.sidecar.admission
        asked: list[int] = []
        # What the loop's first tick sets, with the thread it would start recorded instead:
        # the estimator has not been read yet, and no round holding the admission lock may.
        service.promise.warmer = lambda: asked.append(1)
        posted = (await client.post("/jobs", json=body(name="batch-7"))).json()
        assert (posted["state"], posted["decision"]["reason"]) == ("queued", promise_round.LOADING)
        assert asked == [1]
        est = (await client.get("/estimator")).json()
        assert est["loading"] is True and len(asked) == 2
        # a reader of the queued job answers from its recorded decision, asking again
        job = (await client.get(f"/jobs/{posted['id']}")).json()
        assert job["state"] == "queued" and len(asked) == 3
        await asyncio.to_thread(service.warm)  # the thread's work
        await asyncio.to_thread(service._round, service.clock(), "tick")
        job = (await client.get(f"/jobs/{posted['id']}")).json()
        assert job["state"] == "admitted", [d["reason"] for d in job["decisions"]]
        assert len(asked) == 3
