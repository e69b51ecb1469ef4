"""Dropping many queued jobs at once: each with its own reason, and only those still queued."""

from __future__ import annotations

from app.db import jobs_repo
from app.db.jobs_models import Job
from app.db.session import transaction
from app.domain import tags as t
from tests.conftest import Db


def _job(job_id: str, state: str = t.QUEUED) -> Job:
    return Job(
        id=job_id, name="nightly", queue="root.deadline", state=state, requested_tasks=2,
        deadline_s=60.0, deadline_ms=61_000, submitted_ms=1_000, run={}, tags=[],
        request_hash=job_id, updated_ms=1_000, owner="al",
    )  # fmt: skip


def test_many_queued_jobs_drop_each_with_its_reason_and_others_stay_as_they_are(db: Db) -> None:
    # More than one SQLite statement's worth, and jobs that moved on before the round.
    queued = [f"q{i:04d}" for i in range(700)]
    with transaction(db.sessions) as s:
        s.add_all([_job(job_id) for job_id in queued])
        s.add_all([_job("gone", t.CANCELLED), _job("running", t.ADMITTED)])
    reasons = {job_id: f"cannot finish: {job_id}" for job_id in [*queued, "gone", "running"]}
    with transaction(db.sessions) as s:
        dropped = jobs_repo.drop_queued(s, reasons, 5_000)
    assert dropped == set(queued)
    with db.sessions() as s:
        rows = {job.id: job for job in s.query(Job)}
    for job_id in queued:
        assert rows[job_id].state == t.DROPPED
        assert rows[job_id].reason == f"cannot finish: {job_id}"
        assert rows[job_id].updated_ms == 5_000
    assert (rows["gone"].state, rows["gone"].updated_ms) == (t.CANCELLED, 1_000)
    assert (rows["running"].state, rows["running"].reason) == (t.ADMITTED, "")
    # Again: nothing is queued any more, so nothing is dropped twice.
    with transaction(db.sessions) as s:
        assert jobs_repo.drop_queued(s, reasons, 6_000) == set()


def test_a_reason_is_stored_on_queued_jobs_only_and_cleared_only_where_it_is_still_the_same(
    db: Db,
) -> None:
    # More ids than one statement takes; a job that moved on keeps its own reason.
    queued = [f"q{i:04d}" for i in range(1200)]
    with transaction(db.sessions) as s:
        s.add_all([_job(job_id) for job_id in queued])
        s.add(_job("running", t.ADMITTED))
    with transaction(db.sessions) as s:
        jobs_repo.set_queued_reason(s, [*queued, "running"], "waiting for the history")
        assert jobs_repo.queued_with_reason(s, "waiting for the history") == set(queued)
    with transaction(db.sessions) as s:
        s.get_one(Job, "q0000").reason = "planned since"
    with transaction(db.sessions) as s:
        jobs_repo.set_queued_reason(s, queued, "", only_if="waiting for the history")
        assert jobs_repo.queued_with_reason(s, "waiting for the history") == set()
    with db.sessions() as s:
        rows = {job.id: job for job in s.query(Job)}
    assert rows["q0000"].reason == "planned since"
    assert {rows[job_id].reason for job_id in queued[1:]} == {""}
    assert rows["running"].reason == ""
