"""Repository functions on both engines: idempotent upserts, samples, filters, keyset pages."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.db import repo
from app.db.models import Application, QueueSample
from app.db.session import transaction
from tests.conftest import Db
from tests.factories import app, queue


def _cluster(db: Db) -> int:
    with transaction(db.sessions) as s:
        return repo.ensure_cluster(s, "test", ["http://rm:8088"], 1).id


def test_upsert_apps_is_idempotent_and_updates_progress(db: Db) -> None:
    cid = _cluster(db)
    running = app("application_1_0001", state="RUNNING")
    with transaction(db.sessions) as s:
        repo.upsert_apps(s, cid, [running, app("application_1_0002")], now_ms=10)
    finished = app("application_1_0001", state="FINISHED", finished_ms=5000, vcore_seconds=42)
    with transaction(db.sessions) as s:
        # Listed twice in one poll (running window and finished window overlap): still one row.
        repo.upsert_apps(s, cid, [finished, finished], now_ms=20)
    with db.sessions() as s:
        assert s.scalar(select(func.count()).select_from(Application)) == 2
        row = s.get(Application, "application_1_0001")
        assert row is not None
        assert (row.state, row.vcore_seconds, row.finished_ms) == ("FINISHED", 42, 5000)
        assert (row.first_seen_ms, row.updated_ms) == (10, 20)


def test_the_first_poll_that_sees_an_app_end_is_kept_through_rewrites(db: Db) -> None:
    cid = _cluster(db)
    with transaction(db.sessions) as s:
        repo.upsert_apps(s, cid, [app("application_1_0001", state="RUNNING")], now_ms=10)
    done = app("application_1_0001", state="FINISHED", finished_ms=15)
    for now in (20, 30):  # seen finished at 20, rewritten at 30 (a restart rewrites every app)
        with transaction(db.sessions) as s:
            repo.upsert_apps(s, cid, [done, app("application_1_0002", state="RUNNING")], now)
    with db.sessions() as s:
        first = s.get(Application, "application_1_0001")
        running = s.get(Application, "application_1_0002")
        assert first is not None and running is not None
        assert (first.final_seen_ms, first.updated_ms) == (20, 30)
        assert running.final_seen_ms is None


def test_latest_queue_state_and_history(db: Db) -> None:
    cid = _cluster(db)
    for t, used in ((100, 1), (200, 3)):
        qs = [queue("root", capacity=100, leaf=False), queue("root.etl", used_vcores=used)]
        with transaction(db.sessions) as s:
            ids = repo.upsert_queues(s, cid, qs, t)
            repo.add_queue_samples(s, ids, qs, t)
    with db.sessions() as s:
        latest = {v.queue.path: v for v in repo.latest_queues(s, cid)}
        assert latest["root.etl"].sample is not None
        assert latest["root.etl"].sample.used_vcores == 3
        assert latest["root.etl"].queue.parent_path == "root"
        history = repo.queue_history(s, cid, since_ms=150, path="root.etl")
        assert [v.sample.taken_ms for v in history if v.sample] == [200]
        assert s.scalar(select(func.count()).select_from(QueueSample)) == 4


def test_app_filters_and_cursor_pagination(db: Db) -> None:
    cid = _cluster(db)
    apps = [
        app(
            f"application_1_{i:04d}",
            submitted_ms=1000 + (i // 2) * 10,
            queue="root.etl" if i % 2 else "root.adhoc",
            tags=("deadline:99",) if i % 3 == 0 else (),
            user="bob" if i < 5 else "alice",
        )
        for i in range(12)
    ]
    with transaction(db.sessions) as s:
        repo.upsert_apps(s, cid, apps, now_ms=1)
    seen: list[str] = []
    cursor = None
    with db.sessions() as s:
        while True:
            page, cursor = repo.list_apps(s, repo.AppFilter(), limit=5, cursor=cursor)
            seen += [a.app_id for a in page]
            if cursor is None:
                break
        expected = sorted(apps, key=lambda a: (a.submitted_ms or 0, a.app_id), reverse=True)
        assert seen == [a.app_id for a in expected]
        etl, _ = repo.list_apps(s, repo.AppFilter(queue="etl"), 100, None)
        assert {a.queue for a in etl} == {"root.etl"} and len(etl) == 6
        tagged, _ = repo.list_apps(s, repo.AppFilter(tag="deadline:99"), 100, None)
        assert sorted(a.app_id for a in tagged) == [f"application_1_{i:04d}" for i in (0, 3, 6, 9)]
        bob, _ = repo.list_apps(s, repo.AppFilter(user="bob", submitted_from_ms=1010), 100, None)
        assert sorted(a.app_id for a in bob) == [f"application_1_{i:04d}" for i in (2, 3, 4)]
        with pytest.raises(repo.InvalidCursor):
            repo.list_apps(s, repo.AppFilter(), 5, "not-a-cursor")


def test_ensure_cluster_tolerates_a_concurrent_creator(db: Db) -> None:
    """Two loops starting at once both create the cluster row: the second must not fail."""
    with db.sessions() as first, db.sessions() as second:
        first.begin()
        second.begin()
        a = repo.ensure_cluster(first, "race", ["http://rm:8088"], 1)
        first.commit()
        b = repo.ensure_cluster(second, "race", ["http://rm:8088"], 2)
        second.commit()
        assert a.id == b.id
