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
