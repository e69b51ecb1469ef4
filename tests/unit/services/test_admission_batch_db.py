"""One batch of submissions on both engines: what it costs in SQL statements, idempotent replays
inside it, and incremental rounds that decide the new rows from memory recording exactly what
the same round records when it reads them back."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.exc import DataError
from sqlalchemy.orm import Session

from app.db.jobs_models import Job, JobDecision
from app.db.models import Decision
from app.db.session import transaction
from app.jobs.rounds import AdmissionConfig, RoundMark, admission_round
from app.policies.justice.core import make_params
from app.services.admission import AdmissionService, JobRejected, NewJob, Submitted, job_row
from tests.conftest import Db
from tests.unit.jobs.fakes import FakeRM
from tests.unit.services.test_admission import T0, Clock, Env, new_job

# What an incremental batch of any size costs: the idempotency keys with the stored jobs' first
# decisions, the policy setting, the estimator lock, the holding jobs with the queued count, and
# three inserts (jobs, the round's audit row, the job decisions). SQLite inserts the decisions
# one row at a time (SQLAlchemy batches inserts that return ids only where the order is sure);
# it has no network round trips to save.
BATCH_STATEMENTS = 7


@pytest.fixture
def env(db: Db) -> Iterator[Env]:
    yield Env(db, FakeRM(), Clock(), capacity=64)


@contextmanager
def counting(db: Db) -> Iterator[list[str]]:
    """The SQL statements run on ``db`` inside the block."""
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    event.listen(db.engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", count)


def batch(
    service: AdmissionService, items: Sequence[NewJob], now: int
) -> list[Submitted | BaseException]:
    return service._create_batch([(new, now) for new in items])


def created(outcome: Submitted | BaseException) -> Submitted:
    assert isinstance(outcome, Submitted), outcome
    return outcome


def test_statements_per_batch_do_not_grow_with_its_size(env: Env) -> None:
    service = env.service()
    # The first round is a full one; the ones after it are incremental (same mark).
    created(batch(service, [new_job(2, 600, T0, key="warm")], T0)[0])
    costs = {}
    for size in (1, 4, 16):
        now = env.clock.advance(1)
        items = [new_job(1 + i % 8, 600, now, key=f"s{size}-{i}") for i in range(size)]
        with counting(env.db) as seen:
            outcomes = batch(service, items, now)
        assert service.last_round is not None and service.last_round.incremental
        assert all(created(o).decision is not None for o in outcomes)
        per_row = [s for s in seen if s.startswith("INSERT INTO job_decisions")]
        costs[size] = len(seen) - (len(per_row) - 1 if env.db.engine.name == "sqlite" else 0)
    assert costs == {1: BATCH_STATEMENTS, 4: BATCH_STATEMENTS, 16: BATCH_STATEMENTS}
    # Replays of stored jobs alone: the key lookup answers them (with their first decisions).
    now = env.clock.advance(1)
    with counting(env.db) as seen:
        replays = batch(
            service, [new_job(1 + i % 8, 600, now, key=f"s16-{i}") for i in range(8)], now
        )
    assert len(seen) == 1
    assert all(not created(o).created and created(o).decision is not None for o in replays)


def test_a_batch_replays_a_key_it_stores_and_refuses_it_with_another_body(env: Env) -> None:
    service = env.service()
    stored = created(service.create_job(new_job(4, 600, T0, key="old", h="a"), T0))
    now = env.clock.advance(1)
    outcomes = batch(
        service,
        [
            new_job(3, 600, now, key="new", h="a"),
            new_job(3, 600, now, key="new", h="a"),  # the same request again, same batch
            new_job(3, 600, now, key="new", h="b"),  # the same key with another body
            new_job(4, 600, now, key="old", h="a"),  # a replay of a stored job
            new_job(4, 600, now, key="old", h="z"),
            new_job(5, 600, now),  # no key: always a new job
        ],
        now,
    )
    first, again, other, old, old_other, plain = outcomes
    first, again, old, plain = created(first), created(again), created(old), created(plain)
    assert (first.created, again.created, again.job.id) == (True, False, first.job.id)
    assert first.decision is not None and again.decision is first.decision
    assert (first.decision.action, first.job.state) == ("admit", "admitted")
    assert (old.created, old.job.id) == (False, stored.job.id)
    assert old.decision is not None and stored.decision is not None
    assert old.decision.id == stored.decision.id
    for refused in (other, old_other):
        assert isinstance(refused, JobRejected)
        assert (refused.status, refused.field) == (409, "idempotency_key")
    assert plain.created and plain.job.id not in (first.job.id, stored.job.id)
    with env.db.sessions() as s:
        assert s.scalar(select(func.count()).select_from(Job)) == 3
        # Each stored job has exactly the one decision its round recorded.
        per_job = s.execute(select(JobDecision.job_id, func.count()).group_by(JobDecision.job_id))
        assert sorted(n for _, n in per_job) == [1, 1, 1]


def test_a_batch_answers_with_what_it_committed(env: Env) -> None:
    service = env.service()
    created(batch(service, [new_job(2, 600, T0)], T0)[0])
    now = env.clock.advance(1)
    outcomes = [
        created(o) for o in batch(service, [new_job(8, 600, now), new_job(90, 60, now)], now)
    ]
    with env.db.sessions() as s:
        for outcome in outcomes:
            row = s.get(Job, outcome.job.id)
            assert row is not None and outcome.decision is not None
            columns = [c.key for c in Job.__table__.columns]
            assert {c: getattr(outcome.job, c) for c in columns} == {
                c: getattr(row, c) for c in columns
            }
            assert s.get(JobDecision, outcome.decision.id) is not None
            assert outcome.decision.job_id == row.id


# ---- the incremental round from memory against the same round reading the rows back -----------


def _cfg(policy: str) -> AdmissionConfig:
    return AdmissionConfig(make_params(policy, {"drop_threshold": 40}), 48, "test", "enforce")


def _rows(rng: random.Random, now: int, n: int) -> list[NewJob]:
    return [
        NewJob(
            name=f"r{i}",
            queue="root.deadline",
            deadline_ms=now + rng.randint(1, 900) * 1000,
            requested_tasks=rng.randint(1, 60),
            input_bytes=None,
            block_size=None,
            run={"kind": "application", "command": "sleep 1"},
            tags=[],
            idempotency_key=None,
            request_hash="h",
        )
        for i in range(n)
    ]


def _round_outcome(
    session: Session, cfg: AdmissionConfig, now: int, mark: RoundMark, rows: list[Job], stored: bool
) -> tuple[Any, ...]:
    if stored:
        session.add_all(rows)
        session.flush()
        result = admission_round(
            session, cfg, now, "submission", requesters=[r.id for r in rows], since=mark
        )
    else:
        result = admission_round(session, cfg, now, "submission", since=mark, new_jobs=rows)
    session.flush()
    columns = [c.key for c in Job.__table__.columns]
    jobs = [
        tuple(getattr(j, c) for c in columns)
        for j in session.scalars(
            select(Job).order_by(Job.id).execution_options(populate_existing=True)
        )
    ]
    decisions = [
        (
            d.job_id,
            d.action,
            d.cpus,
            d.req_cpus,
            d.fraction,
            d.ttd_s,
            d.priority,
            d.reason,
            d.numbers,
        )
        for d in session.scalars(select(JobDecision).order_by(JobDecision.id))
    ]
    audit = [
        (r.inputs, r.outputs, r.reason, r.cluster_id)
        for r in session.scalars(select(Decision).order_by(Decision.id))
    ]
    return result.incremental, result.mark, jobs, decisions, audit


@pytest.mark.parametrize("policy", ["justice", "pythia"])
def test_an_incremental_round_from_memory_records_what_reading_back_records(
    db: Db, policy: str
) -> None:
    cfg = _cfg(policy)
    rng = random.Random(7)
    now = T0
    with transaction(db.sessions) as s:
        s.add_all([job_row(new, now) for new in _rows(rng, now, 30)])
    with transaction(db.sessions) as s:
        mark = admission_round(s, cfg, now, "tick").mark
    assert mark is not None
    incremental = 0
    for trial in range(12):
        now = T0 + (trial + 1) * 1000
        new = _rows(rng, now, rng.choice([1, 2, 5, 9]))
        at = [now - rng.randint(0, 3) for _ in new]  # submissions a few ms apart, or not
        outcomes = []
        for stored in (True, False):
            with db.sessions() as s, s.begin():
                rows = [job_row(n, ms) for n, ms in zip(new, at, strict=True)]
                for i, row in enumerate(rows):
                    row.id = f"{trial:04d}{i:028d}"  # the same ids both times
                outcomes.append(_round_outcome(s, cfg, now, mark, rows, stored))
                s.rollback()
        assert outcomes[0] == outcomes[1]
        incremental += outcomes[0][0]
    assert incremental >= 6  # the comparison covered incremental rounds, not only full ones


@pytest.mark.parametrize("policy", ["justice", "pythia"])
def test_each_submitter_owns_its_job_and_signs_its_decision_in_a_shared_batch(
    db: Db, policy: str
) -> None:
    import threading
    import time

    from app.auth.principal import Principal, Role, acting_as

    env = Env(db, FakeRM(), Clock(), capacity=64, policy=policy)
    service = env.service()
    people = [
        Principal(user="olga", role=Role.SUBMITTER, token="ops"),
        Principal(user="bob", role=Role.SUBMITTER, token=None),
    ]
    for rnd in range(2):  # a full round first, then an incremental one
        now = env.clock.advance(1)
        results: dict[str, Submitted] = {}

        def submit(who: Principal, key: str, now: int, results: dict[str, Submitted]) -> None:
            with acting_as(who):
                results[who.user] = service.create_job(new_job(2, 600, now, key=key), now)

        threads = [
            threading.Thread(target=submit, args=(p, f"{p.user}{rnd}", now, results))
            for p in people
        ]
        # Both wait behind the admission lock, so whichever takes it stores both in one batch.
        with service._batcher.lock:
            for th in threads:
                th.start()
            deadline = time.monotonic() + 10
            while len(service._batcher._pending) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(service._batcher._pending) == 2
            batches = service._batcher.batches
        for th in threads:
            th.join(10)
        assert service._batcher.batches == batches + 1  # one batch served both
        with db.sessions() as s:
            for p in people:
                got = results[p.user]
                job = s.get_one(Job, got.job.id)
                first = s.scalars(
                    select(JobDecision).where(JobDecision.job_id == job.id).order_by(JobDecision.id)
                ).first()
                assert job.owner == p.user
                assert first is not None and first.principal == p.label


def test_a_value_the_database_refuses_fails_its_own_job_only(env: Env) -> None:
    """The API refuses what PostgreSQL cannot store; should one get through, the batch it
    shares with other callers' jobs still stores theirs."""
    if env.db.engine.name != "postgresql":
        pytest.skip("SQLite keeps NUL characters in text")
    service = env.service()
    good = [new_job(2, 600, T0, key=f"g{i}") for i in range(3)]
    bad = replace(new_job(2, 600, T0, key="bad"), name="a\x00b")
    outcomes = batch(service, [good[0], bad, good[1], good[2]], T0)
    assert isinstance(outcomes[1], DataError)
    ids = {created(o).job.id for i, o in enumerate(outcomes) if i != 1}
    with env.db.sessions() as s:
        assert set(s.scalars(select(Job.id))) == ids and len(ids) == 3
