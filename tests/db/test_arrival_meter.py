"""Promise's live arrival rate on both engines: each submission counted once, as the
simulator's meter counts it, including a batch committed after a round read past its stamp,
and the same rates after a restart."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import event

from app.db.jobs_models import Job
from app.db.promise_history import ArrivalMeter, job_keys
from app.db.session import transaction
from app.policies.promise import core
from app.policies.promise.estimator import Estimator, Outcome
from tests.conftest import Db

TAU = 3600.0


def _job(job_id: str, submitted_ms: int, deadline_s: float = 100.0, tasks: int = 2) -> Job:
    return Job(
        id=job_id, name="nightly", queue="root.deadline", state="QUEUED", requested_tasks=tasks,
        deadline_s=deadline_s, deadline_ms=submitted_ms + int(deadline_s * 1000),
        submitted_ms=submitted_ms, run={}, tags=[], request_hash=job_id, updated_ms=submitted_ms,
        owner="al",
    )  # fmt: skip


def _add(db: Db, *jobs: Job) -> None:
    with transaction(db.sessions) as s:
        s.add_all(jobs)


def _expected(arrivals: list[tuple[float, float]], now_s: float) -> core.Load:
    meter = core.LoadMeter(TAU)
    for t, w in sorted(arrivals):
        meter.arrive(t, w)
    return meter.load(now_s)


def test_each_submission_counts_once_as_the_simulators_meter_counts_it(db: Db) -> None:
    est = Estimator()  # no history: a job's central work is its deadline window (ratio 1)
    meter = ArrivalMeter(TAU)
    _add(db, _job("a", 1_000_000), _job("b", 1_600_000, deadline_s=50.0))
    with db.sessions() as s:
        first = meter.refresh(s, est, 8, 2_000_000)
        again = meter.refresh(s, est, 8, 2_000_000)
    want = _expected([(1000.0, 200.0), (1600.0, 100.0)], 2000.0)
    assert first.jobs_per_s == pytest.approx(want.jobs_per_s)
    assert first.vcores == pytest.approx(want.vcores)
    assert again == first  # nothing new: nothing counted twice
    # A batch stamped before the last counted job but committed after that read counts once.
    _add(db, _job("late", 1_590_000), _job("c", 2_500_000, tasks=4))
    with db.sessions() as s:
        later = meter.refresh(s, est, 8, 3_000_000)
    want = _expected([(1000.0, 200.0), (1600.0, 100.0), (1590.0, 200.0), (2500.0, 400.0)], 3000.0)
    assert later.jobs_per_s == pytest.approx(want.jobs_per_s)
    assert later.vcores == pytest.approx(want.vcores)
    # A restart (a fresh meter) reads the same submissions back and gives the same rates.
    with db.sessions() as s:
        rebuilt = ArrivalMeter(TAU).refresh(s, est, 8, 3_000_000)
    assert rebuilt.jobs_per_s == pytest.approx(want.jobs_per_s)
    assert rebuilt.vcores == pytest.approx(want.vcores)


def test_the_live_meter_keeps_each_arrivals_slack_and_size(db: Db) -> None:
    est = Estimator()
    for _ in range(3):  # the signature's runs needed 0.2 of their deadline on their 2 tasks
        est.learn(Outcome(job_keys(_job("x", 0)), tasks=2, work=40.0, deadline_s=100.0, max_cpus=2))
    _add(
        db,
        _job("a", 1_000_000),
        _job("b", 1_600_000, deadline_s=50.0),
        _job("c", 1_700_000, deadline_s=10.0, tasks=12),
    )
    with db.sessions() as s:
        load = ArrivalMeter(TAU).refresh(s, est, 8, 2_000_000)
    # a and b could wait 0.8 of their window and still run their one wave in time; c's bound
    # is 0.2 of its window on the 8 vcores it can have, 16 vcore-seconds: 12 tasks of 4/3 s,
    # two waves on 8 vcores take 8/3 s of its 10
    assert load.slack is not None
    assert load.slack.values == pytest.approx((10.0 - 8.0 / 3.0, 40.0, 80.0))
    # a and b run their 2 tasks one after the other on 1 vcore in time; c needs 2 vcores at
    # once (7 waves of 4/3 s fit its 10 s); their work: 40, 20 and 16 vcore-seconds
    assert load.sizes is not None
    assert load.sizes.works == pytest.approx((16.0, 20.0, 40.0))
    assert load.sizes.needs == (2, 1, 1)  # each with its work: c's, b's, a's


def test_submissions_older_than_five_time_constants_are_not_read(db: Db) -> None:
    now_ms = int(10 * TAU * 1000)
    _add(db, _job("old", now_ms - int(6 * TAU * 1000)), _job("new", now_ms - 1000))
    with db.sessions() as s:
        load = ArrivalMeter(TAU).refresh(s, Estimator(), 8, now_ms)
    # One arrival read, but watched for the whole window: the older job shows it was running.
    watched = core.LoadMeter(TAU)
    watched.watch_from((now_ms - 5 * TAU * 1000) / 1000)
    watched.arrive((now_ms - 1000) / 1000, 200.0)
    assert load.jobs_per_s == pytest.approx(watched.load(now_ms / 1000).jobs_per_s)
    assert load.jobs_per_s == pytest.approx(math.exp(-1.0 / TAU) / TAU, rel=1e-3)


def test_a_restart_after_a_busy_hour_reads_thousands_of_submissions_in_bounded_statements(
    db: Db,
) -> None:
    # 2,500 submissions in the last hour: more ids than one statement's bound of 1,000
    start = 1_000_000_000
    _add(db, *(_job(f"j{i:05d}", start + i * 1000) for i in range(2500)))
    now_ms = start + 2_500_000
    with db.sessions() as s:
        load = ArrivalMeter(TAU).refresh(s, Estimator(), 8, now_ms)
    want = _expected([(start / 1000 + i, 200.0) for i in range(2500)], now_ms / 1000)
    assert load.jobs_per_s == pytest.approx(want.jobs_per_s)
    assert load.vcores == pytest.approx(want.vcores)


def _job_reads(db: Db) -> list[str]:
    """The statements that read the jobs table, collected from here on."""
    seen: list[str] = []

    def note(_conn: object, _cur: object, statement: str, *_args: object) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "FROM jobs" in statement:
            seen.append(" ".join(statement.split()))

    event.listen(db.engine, "before_cursor_execute", note)
    return seen


def test_a_rounds_own_submissions_are_counted_without_rereading_the_window(db: Db) -> None:
    est = Estimator()
    meter = ArrivalMeter(TAU)
    start = 1_000_000_000
    _add(db, *(_job(f"old{i:03d}", start + i) for i in range(300)))  # one burst, counted once
    with db.sessions() as s:
        meter.refresh(s, est, 8, start + 1000)
    reads = _job_reads(db)
    arrivals = [(start / 1000 + i / 1000, 200.0) for i in range(300)]
    # A submission round: its new jobs are in its own transaction, not yet committed.
    # Held here as the round holds its new rows (the session's identity map is weak).
    new = [_job("new1", start + 2000), _job("new2", start + 2000, tasks=4)]
    with transaction(db.sessions) as s:
        s.add_all(new)
        s.flush()
        load = meter.refresh(s, est, 8, start + 2000, fresh=["new1", "new2"])
    want = _expected([*arrivals, (start / 1000 + 2, 200.0), (start / 1000 + 2, 400.0)], 1002.0)
    assert load.jobs_per_s == pytest.approx(want.jobs_per_s)
    assert load.vcores == pytest.approx(want.vcores)
    # One aggregate over the window; no statement listed the 300 jobs counted before.
    assert len(reads) == 1 and "count(" in reads[0].lower(), reads


def test_submissions_the_round_did_not_store_are_still_found_in_the_window(db: Db) -> None:
    est = Estimator()
    meter = ArrivalMeter(TAU)
    start = 1_000_000_000
    _add(db, _job("a", start))
    with db.sessions() as s:
        meter.refresh(s, est, 8, start + 1000)
    # Another replica's submission committed meanwhile, stamped before the last one counted,
    # and this round's own; the round knows only its own.
    _add(db, _job("elsewhere", start - 500, tasks=8))
    mine = _job("mine", start + 2000)
    with transaction(db.sessions) as s:
        s.add(mine)
        s.flush()
        load = meter.refresh(s, est, 8, start + 2000, fresh=["mine"])
    want = _expected(
        [(start / 1000, 200.0), (start / 1000 - 0.5, 800.0), (start / 1000 + 2, 200.0)], 1002.0
    )
    assert load.jobs_per_s == pytest.approx(want.jobs_per_s)
    assert load.vcores == pytest.approx(want.vcores)
    with db.sessions() as s:
        again = meter.refresh(s, est, 8, start + 2000)
    assert again == load  # nothing counted twice
    # A round stamped before the latest counted submission (it waited for the lock) still
    # finds one stamped within its own view, and later rounds do not count it again.
    _add(db, _job("between", start + 1500, tasks=6))
    with db.sessions() as s:
        early = meter.refresh(s, est, 8, start + 1600)
        final = meter.refresh(s, est, 8, start + 2000)
    arrivals = [
        (start / 1000, 200.0), (start / 1000 - 0.5, 800.0), (start / 1000 + 2, 200.0),
        (start / 1000 + 1.5, 600.0),
    ]  # fmt: skip
    want = _expected(arrivals, 1002.0)
    assert final.jobs_per_s == pytest.approx(want.jobs_per_s)
    assert final.vcores == pytest.approx(want.vcores)
    assert early.jobs_per_s > 0
