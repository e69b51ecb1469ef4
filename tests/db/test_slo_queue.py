"""A queue SLO's signal on both engines: the longest wait of a not-yet-running app."""

from __future__ import annotations

from app.db import repo
from app.db.session import transaction
from app.services.slo import queue_pending_s
from tests.conftest import Db
from tests.factories import app


def test_queue_pending_time_is_the_oldest_waiting_apps_age(db: Db) -> None:
    apps = [
        app("application_1_0001", queue="web", state="ACCEPTED", submitted_ms=10_000),
        app("application_1_0002", queue="web", state="ACCEPTED", submitted_ms=40_000),
        app("application_1_0003", queue="web", state="RUNNING", submitted_ms=1_000),
        app("application_1_0004", queue="etl", state="ACCEPTED", submitted_ms=0),
    ]
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "t", ["http://rm:8088"], 1).id
        repo.upsert_apps(s, cid, apps, now_ms=1)
    with db.sessions() as s:
        # leaf name or full path, as the RM may report either
        assert queue_pending_s(s, cid, "root.web", 70_000) == 60.0
        assert queue_pending_s(s, cid, "web", 70_000) == 60.0
        assert queue_pending_s(s, cid, "root.idle", 70_000) == 0.0
