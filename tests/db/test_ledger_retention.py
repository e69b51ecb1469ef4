"""Retention of the LTRF ledger on both engines: rows beyond the hourly window go, except each
queue's newest, and a controller started afterwards continues the ledger from where it stopped,
counting every second once, as if nothing had been pruned; a step reads the old rows of each
cluster, not the window's."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func, insert, select, text

from app.db import control_repo, observe_repo, repo
from app.db.control_models import LedgerEntry
from app.db.retention import HOUR_MS, Windows, _delete_old_ledger
from app.db.session import transaction
from app.services.retention import RetentionService
from tests.conftest import Db
from tests.db.test_app_history_scale import _sqlite_plan, _statements
from tests.db.test_job_retention import _pg_rows_read
from tests.unit.control.fakes import two_queues
from tests.unit.services.test_controller import config, controller, polls

WINDOWS = Windows(raw_days=1 / 24, hourly_days=1 / 24, decision_days=1 / 24)
BUSY = {"a": {"used": 4, "pending": 30, "apps": 1}, "b": {"used": 2, "pending": 10, "apps": 1}}


def _ledger(db: Db) -> list[tuple[str, int, int, float]]:
    with db.sessions() as s:
        rows = s.scalars(select(LedgerEntry).order_by(LedgerEntry.start_ms, LedgerEntry.queue))
        return [(r.queue, r.start_ms, r.end_ms, r.total_usage) for r in rows]


async def test_old_ledger_rows_go_and_a_restart_continues_from_the_newest(db: Db) -> None:
    rm = two_queues()
    first = controller(db, rm, config(policy="ltrf"))
    polls(db, rm, 0, 60, **BUSY)
    await first.control(60_000)
    polls(db, rm, 70, 120, **BUSY)
    await first.control(120_000)
    polls(db, rm, 130, 180, **BUSY)
    await first.control(180_000)
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], 0).id
        # a queue the controller no longer manages: its only row is its newest
        s.add(LedgerEntry(cluster_id=cid, queue="root.gone", start_ms=0, end_ms=30_000,
                          weight=1.0, entitlement=1.0, usage=2.0, counted=2.0, debt=7.0,
                          total_usage=2.0, total_counted=2.0))  # fmt: skip
    with db.sessions() as s:
        debts = observe_repo.latest_debts(s, cid)
        cursor = control_repo.ledger_cursor(s, cid)
    # an hour after 150 s: the intervals that ended at 60 s and 120 s are beyond the window
    pruned = RetentionService(db.sessions, WINDOWS, interval_s=3600, batch=3).prune(
        150_000 + HOUR_MS
    )
    assert pruned.deleted_rows["ledger_entries"] == 4
    assert _ledger(db) == [
        ("root.gone", 0, 30_000, 2.0),
        ("root.a", 120_000, 180_000, 720.0),
        ("root.b", 120_000, 180_000, 360.0),
    ]
    with db.sessions() as s:
        assert observe_repo.latest_debts(s, cid) == debts
        assert control_repo.ledger_cursor(s, cid) == cursor == 180_000
    polls(db, rm, 190, 240, **BUSY)
    restarted = controller(db, rm, config(policy="ltrf"))  # a new process, same database
    await restarted.control(240_000)
    # the next interval starts where the kept rows end, and the totals go on from theirs:
    # 4 and 2 vcores for 240 s, each second counted once
    assert _ledger(db)[-2:] == [
        ("root.a", 180_000, 240_000, 960.0),
        ("root.b", 180_000, 240_000, 480.0),
    ]


def _row(cluster_id: int, queue: str, start_ms: int) -> dict[str, Any]:
    return {
        "cluster_id": cluster_id, "queue": queue, "start_ms": start_ms,
        "end_ms": start_ms + 60_000, "weight": 1.0, "entitlement": 1.0, "usage": 1.0,
        "counted": 1.0, "debt": 0.0, "total_usage": 1.0, "total_counted": 1.0,
    }  # fmt: skip


def _pg_index_scans(db: Db, statement: str, params: Any) -> list[tuple[str, str]]:
    """(index, its condition) of each index scan in the executed plan."""
    with db.engine.connect() as conn:
        tree = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, params).scalar_one()
    tree = json.loads(tree) if isinstance(tree, str) else tree

    def walk(node: dict[str, Any]) -> list[tuple[str, str]]:
        own = [(node["Index Name"], node.get("Index Cond", ""))] if "Index Name" in node else []
        return own + [scan for child in node.get("Plans", []) for scan in walk(child)]

    return walk(tree[0]["Plan"])


def test_a_step_reads_each_clusters_old_rows_not_the_window(db: Db) -> None:
    """Two clusters' ledgers, thousands of rows inside the window and a few beyond it: the
    delete is a range of ``ix_ledger_entries_cluster_end`` per cluster, reading those few."""
    queues, ticks = 20, 100
    # the window starts an hour before ``now``: only the first tick of each queue ended before
    now = 60_000 + 1 + HOUR_MS
    with transaction(db.sessions) as s:
        clusters = [repo.ensure_cluster(s, n, ["http://rm:8088"], 0).id for n in ("a", "b")]
        s.execute(
            insert(LedgerEntry),
            [
                _row(cid, f"root.q{q}", tick * 60_000)
                for cid in clusters
                for q in range(queues)
                for tick in range(ticks)
            ],
        )
    if db.engine.dialect.name == "postgresql":
        with db.engine.begin() as conn:
            conn.execute(text("ANALYZE"))
    with _statements(db.engine) as sent, db.sessions() as s:
        assert _delete_old_ledger(s, now - HOUR_MS, 1000) == len(clusters) * queues
        s.rollback()
    deletes = [(st, p) for st, p in sent if st.startswith("DELETE FROM ledger_entries")]
    for statement, params in deletes:
        if db.engine.dialect.name == "sqlite":
            plan = _sqlite_plan(db, statement, params)
            assert any("ix_ledger_entries_cluster_end (cluster_id=? AND end_ms<?)" in line
                       for line in plan), plan  # fmt: skip
            assert not any(line.startswith("SCAN") for line in plan), plan
        else:
            assert _pg_rows_read(db, statement, params, "ledger_entries") < 200
            # a range of the index, not a walk of all of it filtered (which reads no row)
            assert any(
                name == "ix_ledger_entries_cluster_end" and "cluster_id =" in cond
                for name, cond in _pg_index_scans(db, statement, params)
            )
    assert len(deletes) == len(clusters)
    pruned = RetentionService(db.sessions, WINDOWS, interval_s=3600, batch=30).prune(now)
    assert pruned.deleted_rows["ledger_entries"] == len(clusters) * queues
    with db.sessions() as s:
        left = s.scalar(select(func.count()).select_from(LedgerEntry))
    assert left == len(clusters) * queues * (ticks - 1)
