"""New rows inserted through Core (``jobs_repo.insert_new``, ``add_round``): the rows stored are
what the caller's objects show, column defaults and ids included, on both databases."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import inspect, select
from sqlalchemy.exc import IntegrityError

from app.auth.principal import Principal, Role, acting_as
from app.db import jobs_repo, repo
from app.db.jobs_models import Job, JobDecision
from app.db.models import Base, Decision
from app.db.session import transaction
from app.domain import tags as t
from tests.conftest import Db

ALICE = Principal(user="alice", role=Role.SUBMITTER, token="ci")


def _job(job_id: str, key: str | None = None) -> Job:
    # owner, timeout_set and reason left to their column defaults
    return Job(
        id=job_id, name="nightly", queue="root.deadline", state=t.QUEUED, requested_tasks=2,
        deadline_s=60.0, deadline_ms=61_000, submitted_ms=1_000, run={"kind": "sleep"},
        tags=["a"], idempotency_key=key, request_hash=job_id, updated_ms=1_000,
    )  # fmt: skip


def _decision(job_id: str, n: int, principal: str | None = None) -> JobDecision:
    given: dict[str, Any] = {} if principal is None else {"principal": principal}
    return JobDecision(
        **given, job_id=job_id, created_ms=2_000 + n, action="queue", policy="justice",
        reason=f"waits {n}", numbers={"n": n},
    )  # fmt: skip


def _columns(row: Base) -> dict[str, Any]:
    return {c.key: getattr(row, c.key) for c in inspect(type(row)).column_attrs}


def test_stored_rows_are_what_their_objects_show_defaults_and_ids_in_order(db: Db) -> None:
    jobs = [_job(f"j{i}") for i in range(3)]
    decisions = [_decision(job.id, n) for n, job in enumerate(jobs)]
    decisions.append(_decision("j0", 3, principal="bob"))  # given, not the default
    with acting_as(ALICE), transaction(db.sessions) as s:
        jobs_repo.insert_jobs(s, jobs)
        jobs_repo.add_decisions(s, decisions)
    # The defaults a flush would apply, under the principal inserting them, are on the objects.
    assert [(j.owner, j.timeout_set, j.reason) for j in jobs] == [("alice", False, "")] * 3
    assert [d.principal for d in decisions] == ["alice (token ci)"] * 3 + ["bob"]
    assert [d.cpus for d in decisions] == [0] * 4
    ids = [d.id for d in decisions]
    assert all(isinstance(i, int) for i in ids) and ids == sorted(ids) and len(set(ids)) == 4
    with db.sessions() as s:
        stored_jobs = {j.id: _columns(j) for j in s.scalars(select(Job))}
        stored = {d.id: _columns(d) for d in s.scalars(select(JobDecision))}
    assert stored_jobs == {j.id: _columns(j) for j in jobs}
    assert stored == {d.id: _columns(d) for d in decisions}


def test_without_returning_each_row_gets_its_own_id(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A SQLite before 3.35 cannot return the ids of a many-row insert.
    monkeypatch.setattr(
        db.engine.dialect, "insert_executemany_returning_sort_by_parameter_order", False
    )
    with transaction(db.sessions) as s:
        jobs_repo.insert_jobs(s, [_job("j0")])
        decisions = [_decision("j0", n) for n in range(3)]
        jobs_repo.add_decisions(s, decisions)
    with db.sessions() as s:
        stored = {d.id: d.reason for d in s.scalars(select(JobDecision))}
    assert stored == {d.id: f"waits {n}" for n, d in enumerate(decisions)}


def test_a_used_idempotency_key_fails_the_insert_and_stores_none_of_it(db: Db) -> None:
    with transaction(db.sessions) as s:
        jobs_repo.insert_jobs(s, [_job("first", key="k")])
    with pytest.raises(IntegrityError), transaction(db.sessions) as s:
        jobs_repo.insert_jobs(s, [_job("other"), _job("again", key="k")])
    with db.sessions() as s:
        assert list(s.scalars(select(Job.id))) == ["first"]


def test_a_round_records_its_cluster_once_the_poller_created_it(db: Db) -> None:
    def round_row() -> Decision:
        return Decision(
            created_ms=3_000, kind="admission", policy="justice", mode="enforce",
            outputs={"decisions": []}, status="decided", reason="tick: 1 admit",
        )  # fmt: skip

    with transaction(db.sessions) as s:
        before = round_row()
        before_id = jobs_repo.add_round(s, "prod", before)
    with transaction(db.sessions) as s:
        cluster = repo.ensure_cluster(s, "prod", ["http://rm:8088"], 1_000)
        after_id = jobs_repo.add_round(s, "prod", round_row())
    assert (before.id, before.params, before.inputs) == (before_id, {}, {})
    with db.sessions() as s:
        rows = {d.id: (d.cluster_id, d.reason, d.principal) for d in s.scalars(select(Decision))}
    assert rows == {
        before_id: (None, "tick: 1 admit", None),
        after_id: (cluster.id, "tick: 1 admit", None),
    }
