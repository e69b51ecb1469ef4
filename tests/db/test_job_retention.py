"""Retention of deadline jobs on both engines: ended jobs and job decisions are counted into
``job_tallies`` (so ``/metrics`` keeps every count while a scrape reads only the rows not tallied);
beyond the decision window an ended job's decisions go, and the job too if it never had a YARN
application (one that had keeps its row, as ``applications`` keeps the app's); jobs that have not
ended are never touched; a step reads the rows it deletes, not the jobs kept."""

from __future__ import annotations

import json
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, insert, select, text

from app.db import jobs_repo, observe_repo, promise_history, repo
from app.db.jobs_models import EstimatorObservation, Job, JobDecision
from app.db.retention import HOUR_MS, Windows, _prune_jobs
from app.db.session import transaction
from app.observability.prometheus import SidecarCollector
from app.observability.whatif import WhatIfSpec, load_history
from app.services.retention import RetentionService
from tests.conftest import Db
from tests.db.test_app_history_scale import _sqlite_plan, _statements
from tests.factories import app, job_row

NOW = 1_700_000_000_000 // HOUR_MS * HOUR_MS
CLUSTER = "test"
WINDOWS = Windows(raw_days=2 / 24, hourly_days=10 / 24, decision_days=5 / 24)
METRICS = (
    "yarn_sidecar_admission_decisions_total",
    "yarn_sidecar_jobs",
    "yarn_sidecar_job_deadlines_total",
)
Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scrape(db: Db) -> Scrape:
    registry = CollectorRegistry()
    registry.register(SidecarCollector(db.sessions, CLUSTER))
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            if s.name in METRICS:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _step(job_id: str, at_ms: int, action: str, reason: str) -> JobDecision:
    return JobDecision(job_id=job_id, created_ms=at_ms, action=action, reason=reason, numbers={})


def _job(job_id: str, state: str, updated_ms: int, **fields: Any) -> Job:
    return job_row(
        job_id,
        state=state,
        submitted_ms=updated_ms - HOUR_MS,
        updated_ms=updated_ms,
        idempotency_key=f"key-{job_id}",
        idempotency_owner="alice",
        **fields,
    )


def _seed(db: Db) -> None:
    """Jobs in every case retention tells apart, each with its steps."""
    old, mid, recent = NOW - 8 * HOUR_MS, NOW - 3 * HOUR_MS, NOW - 30 * 60_000
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, CLUSTER, ["http://rm:8088"], NOW).id
        apps = [
            app(
                f"application_1_000{i}",
                state="FINISHED",
                submitted_ms=old - HOUR_MS,
                finished_ms=old - 60_000,
                tags=(f"sidecar-job:j{i}",),
                vcore_seconds=4000,
            )
            for i in (1, 2, 3)
        ]
        repo.upsert_apps(s, cid, apps, old)
        jobs = [
            # dropped long ago, never submitted: goes
            _job("j0", "dropped", old),
            # ran on YARN (Promise learned from its app): the job stays, its steps go
            _job(
                "j1",
                "finished",
                old,
                app_id="application_1_0001",
                met_deadline=True,
                granted_cpus=4,
                admitted_ms=old - HOUR_MS,
            ),
            # killed, and TRACK_JOB skipped its app: stays too (its deadline is the what-if's)
            _job("j2", "killed", old, app_id="application_1_0002", met_deadline=False),
            # failed, and TRACK_JOB has not considered its app yet: stays
            _job("j3", "failed", old, app_id="application_1_0003", met_deadline=False),
            # still running after 9 hours: never pruned, its steps neither
            _job("j4", "submitted", old - HOUR_MS, app_id="application_1_0004"),
            # ended inside the decision window: tallied, kept
            _job("j5", "finished", mid, met_deadline=False),
            # ended moments ago: counted from its row until it settles
            _job("j6", "finished", recent, met_deadline=True),
        ]
        s.add_all(jobs)
        s.flush()
        s.add_all(
            [
                EstimatorObservation(
                    app_id="application_1_0001",
                    job_id="j1",
                    source="job",
                    observed_ms=old,
                    learned=True,
                    tasks=4,
                    deadline_s=600.0,
                    comp_time=4000.0,
                    cpus=4,
                    success=True,
                ),
                EstimatorObservation(
                    app_id="application_1_0002",
                    job_id="j2",
                    source="job",
                    observed_ms=old,
                    learned=False,
                    reason="no grant",
                ),
            ]
        )
        for job in jobs:
            at = job.submitted_ms
            jobs_repo.add_decisions(
                s,
                [
                    _step(
                        job.id, at, "queue", f"request of {len(job.id)} CPUs does not fit in 2 free"
                    ),
                    _step(job.id, at + 1, "admit", "granted 4 CPUs (0.5 of the queue)"),
                ],
            )


def _rows(db: Db) -> tuple[set[str], dict[str, int]]:
    with db.sessions() as s:
        jobs = set(s.scalars(select(Job.id)))
        steps = s.execute(select(JobDecision.job_id, func.count()).group_by(JobDecision.job_id))
        return jobs, {str(j): int(n) for j, n in steps}


def _promise_history(db: Db) -> list[Any]:
    with db.sessions() as s:
        return [outcome for outcome, _ in promise_history._observations(s, None, 64)]


def test_ended_jobs_are_pruned_and_every_counter_keeps_its_value(db: Db) -> None:
    _seed(db)
    before = _scrape(db)
    assert before[("yarn_sidecar_job_deadlines_total", (("outcome", "missed"),))] == 3
    promise_before = _promise_history(db)
    assert len(promise_before) == 1
    pruned = RetentionService(db.sessions, WINDOWS, interval_s=3600, batch=3).prune(NOW)
    assert pruned.deleted_rows["jobs"] == 1 and pruned.deleted_rows["job_decisions"] == 8
    jobs, steps = _rows(db)
    # only the job that never reached YARN goes; the others ended beyond the window lose
    # their decisions and keep their rows
    assert jobs == {"j1", "j2", "j3", "j4", "j5", "j6"}
    assert steps == {"j4": 2, "j5": 2, "j6": 2}
    # every counter and gauge reads as before, and Promise rebuilds the same estimator
    assert _scrape(db) == before
    assert _promise_history(db) == promise_before
    with db.sessions() as s:
        assert jobs_repo.get_job(s, "j0") is None  # GET /jobs/j0: 404, as for an unknown id
        assert s.get(EstimatorObservation, "application_1_0002").job_id == "j2"  # type: ignore[union-attr]
        # only the job that ended moments ago and the running one are counted row by row
        untallied = s.scalars(select(Job.id).where(Job.tallied_ms.is_(None))).all()
        assert sorted(untallied) == ["j4", "j6"]
    # a second pass deletes nothing more and counts nothing twice
    again = RetentionService(db.sessions, WINDOWS, interval_s=3600, batch=3).prune(NOW)
    assert again.total_rows == 0
    assert _scrape(db) == before
    # the running job ends; once settled it is tallied, and the counters move by its own counts
    with transaction(db.sessions) as s:
        assert jobs_repo.transition(
            s, "j4", ["submitted"], NOW, state="finished", met_deadline=True
        )
        jobs_repo.add_decision(s, _step("j4", NOW, "finish", "application ended FINISHED"))
    RetentionService(db.sessions, WINDOWS, interval_s=3600, batch=3).prune(NOW + 2 * HOUR_MS)
    after = _scrape(db)
    grew = {k: after.get(k, 0) - before.get(k, 0) for k in after.keys() | before.keys()}
    assert {k: v for k, v in grew.items() if v} == {
        ("yarn_sidecar_jobs", (("state", "submitted"),)): -1,
        ("yarn_sidecar_jobs", (("state", "finished"),)): 1,
        ("yarn_sidecar_job_deadlines_total", (("outcome", "met"),)): 1,
        (
            "yarn_sidecar_admission_decisions_total",
            (("action", "finish"), ("reason", "application ended FINISHED")),
        ): 1,
    }


def test_a_pruned_jobs_idempotency_key_makes_a_new_job(db: Db) -> None:
    _seed(db)
    RetentionService(db.sessions, WINDOWS, interval_s=3600, batch=100).prune(NOW)
    with transaction(db.sessions) as s:
        # j1 ran on YARN and is kept: its key still replays it, without the pruned first
        # decision (the replay answers no decision and no ETA)
        kept = jobs_repo.jobs_by_keys(s, {("alice", "key-j1"), ("alice", "key-j0")})
        assert list(kept) == [("alice", "key-j1")] and kept[("alice", "key-j1")][1] is None
        # j0 was pruned: its key is free, and a new job takes it without a conflict
        jobs_repo.insert_jobs(
            s,
            [
                job_row(
                    "j9",
                    state="queued",
                    submitted_ms=NOW,
                    idempotency_key="key-j0",
                    idempotency_owner="alice",
                )
            ],
        )
    with db.sessions() as s:
        assert jobs_repo.jobs_by_keys(s, {("alice", "key-j0")})[("alice", "key-j0")][0].id == "j9"


def test_a_what_if_over_a_pruned_period_keeps_the_sidecar_jobs_deadlines(db: Db) -> None:
    """The what-if tool reads a sidecar app's deadline from its job: retention keeps every job
    that had an app, as ``applications`` keeps the app, whatever TRACK_JOB made of it."""
    _seed(db)
    apps = [f"application_1_000{i}" for i in (1, 2, 3)]
    old = NOW - 8 * HOUR_MS
    spec = WhatIfSpec(policy="static", since_ms=old - 3 * HOUR_MS, until_ms=old)

    def deadlines() -> tuple[dict[str, float], dict[str, float | None]]:
        with db.sessions() as s:
            history = load_history(s, CLUSTER, spec)
            return observe_repo.job_deadlines(s, apps), {
                j.job_id: j.deadline_s for j in history.jobs
            }

    before = deadlines()
    assert before[0] == {app_id: 600.0 for app_id in apps}
    assert before[1] == before[0]
    pruned = RetentionService(db.sessions, WINDOWS, interval_s=3600, batch=100).prune(NOW)
    assert pruned.deleted_rows["job_decisions"] == 8
    assert deadlines() == before


def _tallied_job(job_id: str, state: str, at_ms: int, app_id: str | None) -> dict[str, Any]:
    return {**_values(_job(job_id, state, at_ms, app_id=app_id)), "tallied_ms": at_ms + HOUR_MS}


def _tallied_step(job_id: str, at_ms: int) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "created_ms": at_ms,
        "action": "admit",
        "reason": "granted 4 CPUs",
        "numbers": {},
        "tallied_ms": at_ms + HOUR_MS,
    }


def test_a_step_reads_the_rows_it_deletes_not_the_jobs_kept(db: Db) -> None:
    """Thousands of jobs kept beyond the window (they ran on YARN, and Promise learned from
    them), thousands of appless jobs and decisions inside it, and a few rows to delete: each
    statement of the step reads those few, through ``ix_jobs_prunable`` and
    ``ix_job_decisions_created``, not the history."""
    history, few = 3000, 5
    old, young = NOW - 30 * HOUR_MS, NOW - HOUR_MS
    cut = NOW - int(WINDOWS.decision_days * 24 * HOUR_MS)
    with transaction(db.sessions) as s:
        s.execute(
            insert(Job),
            [
                _tallied_job(f"k{i}", "finished", old, f"application_1_{i:05d}")
                for i in range(history)
            ]
            + [_tallied_job(f"y{i}", "dropped", young, None) for i in range(history)]
            + [_tallied_job(f"d{i}", "dropped", old, None) for i in range(few)],
        )
        s.execute(
            insert(EstimatorObservation),
            [
                {
                    "app_id": f"application_1_{i:05d}",
                    "job_id": f"k{i}",
                    "source": "job",
                    "observed_ms": old,
                    "learned": True,
                    "tasks": 4,
                    "deadline_s": 600.0,
                    "comp_time": 1000.0,
                    "cpus": 4,
                    "success": True,
                }
                for i in range(history)
            ],
        )
        s.execute(
            insert(JobDecision),
            [_tallied_step(f"y{i}", young) for i in range(history)]
            + [_tallied_step(f"{k}{i}", old) for i in range(few) for k in "kd"],
        )
    if db.engine.dialect.name == "postgresql":
        with db.engine.begin() as conn:
            conn.execute(text("ANALYZE"))
    with _statements(db.engine) as sent, db.sessions() as s:
        # a batch near what is there: PostgreSQL plans a larger one over a small table as a scan
        assert _prune_jobs(s, cut, 2 * few) == (2 * few, few)
        s.rollback()
    for table, index in (
        ("jobs", "ix_jobs_prunable"),
        ("job_decisions", "ix_job_decisions_created"),
    ):
        statement, params = next((st, p) for st, p in sent if st.startswith(f"DELETE FROM {table}"))
        if db.engine.dialect.name == "sqlite":
            plan = _sqlite_plan(db, statement, params)
            assert any(f"USING INDEX {index} " in line for line in plan), plan
            assert not any(line.startswith("SCAN") or "TEMP B-TREE" in line for line in plan), plan
        else:
            for read in ("jobs", "job_decisions"):
                assert _pg_rows_read(db, statement, params, read) < 50, (table, read)
    pruned = RetentionService(db.sessions, WINDOWS, interval_s=3600, batch=100).prune(NOW)
    assert pruned.deleted_rows["jobs"] == few
    assert pruned.deleted_rows["job_decisions"] == 2 * few
    jobs, steps = _rows(db)
    assert len(jobs) == 2 * history and sum(steps.values()) == history


def _pg_rows_read(db: Db, statement: str, params: Any, table: str) -> int:
    """Rows the executed plan took from ``table`` (returned or filtered out)."""
    with db.engine.connect() as conn:
        plan = conn.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params)
        tree = plan.scalar_one()
    tree = json.loads(tree) if isinstance(tree, str) else tree

    def walk(node: dict[str, Any]) -> int:
        own = 0
        if node.get("Relation Name") == table:
            own = node.get("Actual Loops", 1) * (
                node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
            )
        return own + sum(walk(child) for child in node.get("Plans", []))

    return int(walk(tree[0]["Plan"]))


def test_a_scrape_reads_only_the_rows_not_tallied(db: Db) -> None:
    """Thousands of tallied jobs and decisions next to a few live ones: the scrape's counts read
    the live rows through the partial indexes, and the tallies, never the history."""
    _seed(db)
    history = 3000
    with transaction(db.sessions) as s:
        s.execute(
            insert(Job),
            [
                {**_values(_job(f"h{i}", "dropped", NOW - 9 * HOUR_MS)), "tallied_ms": NOW}
                for i in range(history)
            ],
        )
        s.execute(
            insert(JobDecision),
            [
                {
                    "job_id": f"h{i}",
                    "created_ms": NOW - 9 * HOUR_MS,
                    "action": "drop",
                    "reason": f"late by {i} s",
                    "numbers": {},
                    "tallied_ms": NOW,
                }
                for i in range(history)
            ],
        )
    if db.engine.dialect.name == "postgresql":
        with db.engine.begin() as conn:
            conn.execute(text("ANALYZE"))
    with _statements(db.engine) as sent, db.sessions() as s:
        snap = observe_repo.snapshot(s, CLUSTER)
    # the history is tallied elsewhere (here: nowhere), so only the seeded jobs count
    assert sum(snap.jobs_by_state.values()) == 7
    for table in ("jobs", "job_decisions"):
        statement, params = next(
            (st, p) for st, p in sent if f"FROM {table}" in st and "GROUP BY" in st
        )
        if db.engine.dialect.name == "sqlite":
            plan = _sqlite_plan(db, statement, params)
            lines = [line for line in plan if f" {table} " in f"{line} "]
            assert lines and all(f"ix_{table}_untallied" in line for line in lines), plan
        else:
            assert _pg_rows_read(db, statement, params, table) < 100


def _values(job: Job) -> dict[str, Any]:
    return {c.key: getattr(job, c.key) for c in Job.__table__.columns if c.key != "tallied_ms"}
