"""Tick rounds that rank the waiting jobs outside the admission lock: on both engines they change
exactly the jobs the full round under the lock changes, they give way to the full round whenever
the mark moved between the ranking and the lock, and the service reads the waiting jobs without
holding the lock."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import jobs_repo
from app.db.jobs_models import Job, JobDecision
from app.db.session import transaction
from app.domain import tags as t
from app.jobs import tick_round
from app.jobs.rounds import AdmissionConfig, RoundMark, admission_round
from app.policies.justice import core
from app.policies.justice.admission import JusticeAdmission
from app.services.admission import job_row
from tests.conftest import Db
from tests.unit.jobs.fakes import FakeRM
from tests.unit.policies.justice.test_monotone import _state
from tests.unit.services.test_admission import T0, Clock, Env, new_job
from tests.unit.services.test_admission_batch_db import _rows

CAP = 16


def _cfg(policy: str, capacity: int = CAP) -> AdmissionConfig:
    return AdmissionConfig(
        core.make_params(policy, {"drop_threshold": 10_000}), capacity, "test", "enforce"
    )


def _seed(db: Db, policy: str, seed: int) -> tuple[AdmissionConfig, RoundMark]:
    """Waiting jobs (and no others) with a learned fraction (so requests grow towards drops) and
    a first full round, whose mark the ticks rely on."""
    rng = random.Random(seed)
    cfg = _cfg(policy)
    with transaction(db.sessions) as s:
        s.query(JobDecision).delete()
        s.query(Job).delete()
        row = jobs_repo.lock_estimator(s, T0)
        jobs_repo.save_estimator(s, row, _state(rng, policy), T0)
        s.add_all([job_row(new, T0 - rng.randint(0, 60_000)) for new in _rows(rng, T0, 40)])
    with transaction(db.sessions) as s:
        mark = admission_round(s, cfg, T0, "tick").mark
    assert mark is not None
    return cfg, mark


def _state_of(session: Session) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every job row, and every job decision without its round's numbers (the quiet tick adds
    what it ranked outside the lock to them)."""
    columns = [c.key for c in Job.__table__.columns]
    jobs = [
        tuple(getattr(j, c) for c in columns)
        for j in session.scalars(
            select(Job).order_by(Job.id).execution_options(populate_existing=True)
        )
    ]
    decisions = [
        (d.job_id, d.action, d.cpus, d.req_cpus, d.fraction, d.ttd_s, d.priority, d.reason)
        for d in session.scalars(select(JobDecision).order_by(JobDecision.job_id, JobDecision.id))
    ]
    return jobs, decisions


def _every_waiting_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds read every waiting job, as before ``AdmissionPolicy.waiting_filter``: the
    reference the selective reads are compared with."""
    monkeypatch.setattr(JusticeAdmission, "waiting_filter", lambda self, estimator, free: None)


@pytest.mark.parametrize("policy", ["justice", "pythia"])
def test_a_tick_ranked_outside_the_lock_changes_what_the_full_round_changes(
    db: Db, policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    quiet = drops = unread = 0
    for seed in range(4):
        cfg, mark = _seed(db, policy, seed)
        for step in range(1, 16):
            now = T0 + step * 40_000
            outcomes = []
            for full in (True, False):
                with monkeypatch.context() as patch, db.sessions() as s, s.begin():
                    if full:
                        _every_waiting_job(patch)
                        result = admission_round(s, cfg, now, "tick")
                    else:
                        taken = tick_round.snapshot(s, cfg, now, mark)
                        if taken is not None:
                            unread += jobs_repo.count_queued(s) - taken.evaluated
                        got = None if taken is None else tick_round.apply(
                            s, cfg, now, "tick", taken, mark
                        )  # fmt: skip
                        if got is None:
                            break  # the full round runs instead: nothing to compare
                        result = got
                    s.flush()
                    changed = sum(d.action != "queue" for d in result.applied)
                    outcomes.append((result.mark, *_state_of(s), changed))
                    s.rollback()
            if len(outcomes) == 2:
                quiet += 1
                drops += outcomes[0][-1]
                assert outcomes[0] == outcomes[1]
            # Move on as the service would: the full round's effects committed.
            with transaction(db.sessions) as s:
                next_mark = admission_round(s, cfg, now, "tick").mark
            assert next_mark is not None
            mark = next_mark
    # The comparison covered quiet ticks that dropped jobs, not only full rounds, and ticks that
    # left waiting jobs before their drop horizon unread.
    assert quiet >= 10 and drops >= 5 and unread > 0


def _job_state(session: Session, job_id: str) -> str | None:
    return session.scalar(select(Job.state).where(Job.id == job_id))


def _one_waiting_and_one_admitted(db: Db) -> tuple[AdmissionConfig, RoundMark, Job, Job]:
    cfg = _cfg("justice", capacity=8)
    held = job_row(new_job(4, 600, T0), T0)
    waiting = job_row(new_job(8, 30, T0), T0)  # all 8 CPUs: waits, then its deadline passes
    with transaction(db.sessions) as s:
        s.add(held)
        s.flush()
        mark = admission_round(s, cfg, T0, "tick").mark
        assert _job_state(s, held.id) == t.ADMITTED
        s.add(waiting)
        s.flush()
        mark = admission_round(s, cfg, T0, "tick").mark
        assert _job_state(s, waiting.id) == t.QUEUED
    assert mark is not None
    return cfg, mark, held, waiting


def test_a_quiet_tick_drops_a_job_whose_deadline_passed(db: Db) -> None:
    cfg, mark, _, waiting = _one_waiting_and_one_admitted(db)
    now = T0 + 31_000
    with db.sessions() as s:
        taken = tick_round.snapshot(s, cfg, now, mark)
    assert taken is not None and [d.job_id for d in taken.drops] == [waiting.id]
    with transaction(db.sessions) as s:
        result = tick_round.apply(s, cfg, now, "tick", taken, mark)
    assert result is not None and [d.action for d in result.applied] == ["drop"]
    with db.sessions() as s:
        assert _job_state(s, waiting.id) == t.DROPPED
        reasons = s.scalars(select(JobDecision.reason).where(JobDecision.job_id == waiting.id))
        assert list(reasons)[-1] == "time to deadline is gone"


def _apply_after(db: Db, change: str) -> Any:
    cfg, mark, held, waiting = _one_waiting_and_one_admitted(db)
    now = T0 + 31_000
    with db.sessions() as s:
        taken = tick_round.snapshot(s, cfg, now, mark)
    assert taken is not None
    with transaction(db.sessions) as s:
        if change == "cpus freed":
            assert jobs_repo.transition(s, held.id, [t.ADMITTED], now, state=t.CANCELLED)
        elif change == "estimator learned":
            row = jobs_repo.lock_estimator(s, now)
            jobs_repo.save_estimator(s, row, core.EstimatorState(), now)
        elif change == "capacity changed":
            cfg = _cfg("justice", capacity=6)
        elif change == "job cancelled":
            assert jobs_repo.transition(s, waiting.id, [t.QUEUED], now, state=t.CANCELLED)
    with transaction(db.sessions) as s:
        result = tick_round.apply(s, cfg, now, "tick", taken, mark)
    with db.sessions() as s:
        return result, _job_state(s, waiting.id)


@pytest.mark.parametrize("change", ["cpus freed", "estimator learned", "capacity changed"])
def test_a_tick_gives_way_to_the_full_round_when_the_mark_moved(db: Db, change: str) -> None:
    result, state = _apply_after(db, change)
    assert result is None and state == t.QUEUED  # nothing applied: the full round decides


def test_a_job_cancelled_after_the_ranking_is_not_dropped(db: Db) -> None:
    result, state = _apply_after(db, "job cancelled")
    assert result is not None and result.applied == [] and result.round_id is None
    assert state == t.CANCELLED


@pytest.fixture
def env(db: Db) -> Iterator[Env]:
    yield Env(db, FakeRM(), Clock(), capacity=8)


def test_the_service_reads_the_waiting_jobs_of_a_quiet_tick_without_the_lock(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = env.service()
    for tasks, deadline in ((4, 600), (8, 600), (8, 30)):
        service.create_job(new_job(tasks, deadline, T0), T0)
    read = jobs_repo.waiting_inputs
    reads: list[tuple[bool, int]] = []  # (lock held, waiting jobs read)

    def watched(session: Session, *args: Any, **kwargs: Any) -> Any:
        waiting = read(session, *args, **kwargs)
        reads.append((service._db_lock.locked(), len(waiting)))
        return waiting

    monkeypatch.setattr(jobs_repo, "waiting_inputs", watched)
    result = service._round(env.clock.advance(31), "tick")
    # one read outside the lock, of the one job past its drop horizon (while bootstrapping
    # Algorithm 6 drops only at the deadline): the 30 s job, not the 600 s one that waits for
    # more CPUs than are free
    assert reads == [(False, 1)]
    assert result.incremental and [d.action for d in result.applied] == ["drop"]
    # A round on completions is the full round, under the lock; the waiting job's request of 8
    # exceeds the 4 CPUs free and its deadline is far: nothing to read.
    reads.clear()
    service._round(env.clock.advance(1), "completion")
    assert reads == [(True, 0)]


def _counting(read: list[int]) -> Any:
    """``jobs_repo.waiting_inputs`` that appends how many jobs it returned to ``read``."""
    real = jobs_repo.waiting_inputs

    def counted(session: Session, *args: Any, **kwargs: Any) -> Any:
        waiting = real(session, *args, **kwargs)
        read.append(len(waiting))
        return waiting

    return counted


@pytest.mark.parametrize("policy", ["justice", "pythia"])
def test_a_full_round_reading_only_the_jobs_it_can_change_decides_as_over_every_job(
    db: Db, policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    admits = drops = unread = 0
    for seed in range(4):
        rng = random.Random(100 + seed)
        cfg, _ = _seed(db, policy, seed)
        for step in range(1, 13):
            now = T0 + step * 20_000
            with transaction(db.sessions) as s:
                # a running job ends now and then: CPUs come free for the waiting ones
                held = s.scalars(select(Job.id).where(Job.state == t.ADMITTED).order_by(Job.id))
                ended = [job_id for job_id in held if rng.random() < 0.4]
                for job_id in ended:
                    assert jobs_repo.transition(s, job_id, [t.ADMITTED], now, state=t.FINISHED)
            outcomes = []
            for every in (True, False):
                read: list[int] = []
                with monkeypatch.context() as patch, db.sessions() as s, s.begin():
                    if every:
                        _every_waiting_job(patch)
                    else:
                        patch.setattr(jobs_repo, "waiting_inputs", _counting(read))
                    queued = jobs_repo.count_queued(s)
                    result = admission_round(s, cfg, now, "completion")
                    s.flush()
                    # a queued decision writes nothing; the rest must be the same
                    applied = [
                        (d.job_id, d.action, d.cpus) for d in result.applied if d.action != "queue"
                    ]
                    outcomes.append((result.mark, *_state_of(s), applied))
                    unread += queued - sum(read) if read else 0
                    s.rollback()
            assert outcomes[0] == outcomes[1]
            admits += sum(a == "admit" for _, a, _ in outcomes[0][-1])
            drops += sum(a == "drop" for _, a, _ in outcomes[0][-1])
            with transaction(db.sessions) as s:
                admission_round(s, cfg, now, "completion")
    # rounds that admitted and dropped jobs, and left jobs they could not change unread
    assert admits >= 5 and drops >= 5 and unread > 0
