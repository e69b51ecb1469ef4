"""Retention of the LTRF ledger on both engines: rows beyond the hourly window go, except each
queue's newest, and a controller started afterwards continues the ledger from where it stopped,
counting every second once, as if nothing had been pruned."""

from __future__ import annotations

from sqlalchemy import select

from app.db import control_repo, observe_repo, repo
from app.db.control_models import LedgerEntry
from app.db.retention import HOUR_MS, Windows
from app.db.session import transaction
from app.services.retention import RetentionService
from tests.conftest import Db
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
