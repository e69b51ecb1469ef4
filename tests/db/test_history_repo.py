"""The MapReduce history on both engines: what the collector asks about, idempotent storing,
give-up after repeated misses, restart safety, and the DD/TT/JS inputs read back from it."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import func, select

from app.db import history_repo, repo
from app.db.history_models import MapReduceJobRow, MapReduceTaskRow
from app.db.session import transaction
from app.domain.history import MAP, REDUCE, MapReduceJob, task_use
from app.domain.observation import Cursors
from app.services.history import HistoryCollector
from app.services.policy_inputs import load_inputs
from app.yarn.errors import RMUnavailable
from tests.conftest import Db
from tests.factories import app
from tests.unit.yarn.test_jobhistory import WORDCOUNT, client


def _mr(
    app_id: str, *, state: str = "FINISHED", finished_ms: int | None = 5_000, **kw: object
) -> object:
    return dataclasses.replace(
        app(app_id, state=state, finished_ms=finished_ms if state != "RUNNING" else None, **kw),  # type: ignore[arg-type]
        app_type="MAPREDUCE",
        name="word count",
    )


def _setup(db: Db, apps: list[object]) -> int:
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], 1).id
        repo.upsert_apps(s, cid, apps, now_ms=1)  # type: ignore[arg-type]
    return cid


async def _wordcount() -> MapReduceJob:
    async with client() as jhs:
        job = await jhs.job_of_app(WORDCOUNT)
    assert job is not None
    return job


class FakeJhs:
    """Answers from a dict; an id mapped to an exception raises it."""

    def __init__(self, answers: dict[str, MapReduceJob | Exception | None]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def job_of_app(self, app_id: str) -> MapReduceJob | None:
        self.asked.append(app_id)
        answer = self.answers.get(app_id)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_collector_stores_each_finished_mapreduce_app_once_and_survives_a_restart(
    db: Db,
) -> None:
    job = await _wordcount()
    apps = [
        _mr("application_1_0001", finished_ms=1_000),
        _mr("application_1_0002", finished_ms=2_000),
        _mr("application_1_0003", state="RUNNING"),
        app("application_1_0004", state="FINISHED", finished_ms=3_000),  # not MapReduce
    ]
    _setup(db, apps)
    jhs = FakeJhs({"application_1_0001": job, "application_1_0002": job})
    first = HistoryCollector(jhs, db.sessions, cluster_name="test", interval_s=10, batch=1)
    await first.run_once(10_000)
    assert jhs.asked == ["application_1_0001"]  # oldest first, one per tick with batch=1
    # a new process (restart) picks up what is left; nothing is asked twice
    again = HistoryCollector(jhs, db.sessions, cluster_name="test", interval_s=10)
    await again.run_once(20_000)
    await again.run_once(30_000)
    assert jhs.asked == ["application_1_0001", "application_1_0002"]
    with db.sessions() as s:
        assert s.scalar(select(func.count()).select_from(MapReduceJobRow)) == 2
        assert s.scalar(select(func.count()).select_from(MapReduceTaskRow)) == 8
        stored = history_repo.job_of(s, "application_1_0002")
    assert stored is not None
    row, tasks = stored
    assert (row.status, row.input_bytes, row.map_phase_ms, row.reduce_phase_ms) == (
        "ok",
        3015609,
        5327,
        4603,
    )
    assert [t.kind for t in tasks] == ["MAP", "MAP", "MAP", "REDUCE"]


async def test_storing_twice_keeps_one_row_and_the_same_tasks(db: Db) -> None:
    job = await _wordcount()
    _setup(db, [_mr("application_1_0001")])
    for now in (10, 20):
        with transaction(db.sessions) as s:
            history_repo.store_job(s, "application_1_0001", job, 16.0, now)
    with db.sessions() as s:
        assert s.scalar(select(func.count()).select_from(MapReduceTaskRow)) == 4
        row = s.get(MapReduceJobRow, "application_1_0001")
        assert row is not None and (row.attempts, row.fetched_ms, row.cluster_vcores) == (
            2,
            20,
            16.0,
        )


async def test_unknown_jobs_are_retried_later_then_given_up_and_an_outage_stops_the_tick(
    db: Db,
) -> None:
    _setup(
        db,
        [
            _mr("application_1_0001", finished_ms=1_000),
            _mr("application_1_0002", finished_ms=2_000),
        ],
    )
    jhs = FakeJhs({"application_1_0001": None, "application_1_0002": None})
    collector = HistoryCollector(
        jhs, db.sessions, cluster_name="test", interval_s=10, retry_after_s=30, max_attempts=2
    )
    await collector.run_once(10_000)
    await collector.run_once(20_000)  # too soon to ask again
    assert jhs.asked == ["application_1_0001", "application_1_0002"]
    await collector.run_once(40_000)
    await collector.run_once(80_000)  # both gave up after two misses
    assert len(jhs.asked) == 4
    with db.sessions() as s:
        statuses = {r.app_id: (r.status, r.attempts) for r in s.scalars(select(MapReduceJobRow))}
    assert statuses == {"application_1_0001": ("missing", 2), "application_1_0002": ("missing", 2)}

    _setup(
        db,
        [
            _mr("application_1_0005", finished_ms=5_000),
            _mr("application_1_0006", finished_ms=6_000),
        ],
    )
    down = FakeJhs({"application_1_0005": RMUnavailable("refused")})
    collector.source = down
    await collector.run_once(100_000)
    assert down.asked == ["application_1_0005"] and collector.last_error == "refused"
    with db.sessions() as s:  # an outage records nothing: both are asked on the next tick
        assert s.get(MapReduceJobRow, "application_1_0005") is None


async def test_policy_inputs_read_dd_tt_and_js_from_the_history(db: Db) -> None:
    job = await _wordcount()
    waiting = dataclasses.replace(_mr("application_1_0002", state="ACCEPTED"), tags=("profile:wc",))
    running = dataclasses.replace(
        _mr("application_1_0003", state="RUNNING", submitted_ms=50_000), tags=("profile:wc",)
    )
    done = dataclasses.replace(_mr("application_1_0001"), tags=("profile:wc",))
    cid = _setup(db, [done, waiting, running])
    with transaction(db.sessions) as s:
        history_repo.store_job(s, "application_1_0001", job, 16.0, 95_000)
    with db.sessions() as s:
        view, _ = load_inputs(s, cid, ["etl"], 100_000, 10, history=True)
        plain, cursors = load_inputs(s, cid, ["etl"], 100_000, 10)
    assert cursors.history_seq is None  # without history there is nothing to count from
    q = view.queues["etl"]
    assert q.waiting_input_bytes == 3015609  # the waiting wc job reads what wc read before
    assert q.completed_tasks == 4  # the history that arrived in the interval
    # running 50 s against the profile's 12.331 s
    assert q.slowdowns == (50 / 12.331,)
    assert (plain.queues["etl"].waiting_input_bytes, plain.queues["etl"].slowdowns) == (0.0, ())


async def test_completed_tasks_count_once_however_late_the_history_commits(db: Db) -> None:
    job = await _wordcount()  # 4 tasks
    cid = _setup(db, [_mr(f"application_1_000{k}") for k in (1, 2, 3)])

    def tick(now_ms: int, after: int | None) -> tuple[float, int]:
        with db.sessions() as s:
            inputs, cursors = load_inputs(
                s, cid, ["etl"], now_ms, 10, history=True, cursors=Cursors(history_seq=after)
            )
        assert cursors.history_seq is not None
        return inputs.queues["etl"].completed_tasks, cursors.history_seq

    with transaction(db.sessions) as s:
        history_repo.store_job(s, "application_1_0001", job, 16.0, 85_000)  # before the window
        history_repo.store_job(s, "application_1_0002", job, 16.0, 95_000)
    # the first tick (no cursor yet) counts one interval back: only the second job
    tasks, cursor = tick(100_000, None)
    assert tasks == 4
    # A collector tick that started (and stamped its fetch) at 99 s commits after the controller's
    # tick at 100 s read the database: a window (100 s, 110 s] of fetch times would never see it.
    with transaction(db.sessions) as s:
        history_repo.store_job(s, "application_1_0003", job, 16.0, 99_000)
    tasks, cursor = tick(110_000, cursor)
    assert tasks == 4
    # counted once: nothing new since
    assert tick(120_000, cursor) == (0.0, cursor)
    # a tick whose decision was never recorded leaves the cursor where it was: counted again
    assert tick(130_000, cursor - 1)[0] == 4


async def test_task_rows_are_bounded_per_job_and_phases_use_every_task(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await _wordcount()
    _setup(db, [_mr("application_1_0001")])
    monkeypatch.setattr(history_repo, "MAX_TASK_ROWS", 2)
    with transaction(db.sessions) as s:
        history_repo.store_job(s, "application_1_0001", job, 16.0, 10)
    with db.sessions() as s:
        stored = history_repo.job_of(s, "application_1_0001")
    assert stored is not None
    row, tasks = stored
    assert len(tasks) == 2
    assert (row.map_phase_ms, row.map_peak_vcores) == (5327, 3.0)  # from all four tasks


async def test_stored_jobs_read_back_what_phases_and_task_use_need(db: Db) -> None:
    job = await _wordcount()
    cid = _setup(db, [_mr("application_1_0001"), _mr("application_1_0002")])
    later = dataclasses.replace(job, job_id="job_1_0002", submit_ms=(job.submit_ms or 0) + 5000)
    with transaction(db.sessions) as s:
        history_repo.store_job(s, "application_1_0002", later, 16.0, 10)
        history_repo.store_job(s, "application_1_0001", job, 16.0, 10)
    with db.sessions() as s:
        stored = history_repo.stored_jobs(s, cid, limit=10)
        newest = history_repo.stored_jobs(s, cid, limit=1)
    assert [j.job_id for j in stored] == [job.job_id, "job_1_0002"]  # oldest first
    assert [j.job_id for j in newest] == ["job_1_0002"]
    back = stored[0]
    assert (back.maps_completed, back.reduces_completed) == (job.maps_completed, 1)
    assert (back.avg_map_ms, back.avg_shuffle_ms) == (job.avg_map_ms, job.avg_shuffle_ms)
    assert task_use(back, MAP) == task_use(job, MAP)
    assert task_use(back, REDUCE) == task_use(job, REDUCE)


def test_a_backlog_of_apps_seen_ending_after_an_outage_is_not_one_intervals_completions(
    db: Db,
) -> None:
    old = _mr("application_1_0001", finished_ms=10_000)  # ended long before
    recent = _mr("application_1_0002", finished_ms=95_000)  # ended within the interval
    cid = _setup(db, [])
    with transaction(db.sessions) as s:
        repo.upsert_apps(s, cid, [old, recent], now_ms=99_000)  # type: ignore[list-item]
    with db.sessions() as s:
        # the last tick counted up to 20 s; the sidecar was down since; the poll at 99 s saw both
        inputs, cursors = load_inputs(
            s,
            cid,
            ["etl"],
            100_000,
            10,
            cursors=Cursors(apps_seen_ms=20_000),
            lag_ms=3_000,
            polled_ms=99_000,
        )
    assert inputs.queues["etl"].completed_apps == 1
    assert cursors.apps_seen_ms == 99_000
