"""Retention on both engines: raw samples inside the raw window untouched, hourly means between
the windows, nothing beyond; node change records thinned to one an hour, each node's current
state kept; decisions
pruned with the references to them nulled; small batches; a second run changes nothing."""

from __future__ import annotations

from sqlalchemy import func, select

from app.db import repo
from app.db.control_models import ConfigPush
from app.db.models import Decision, NodeSample, QueueSample
from app.db.retention import HOUR_MS, Windows
from app.db.session import transaction
from app.domain.model import NodeState, Resources
from app.services.retention import RetentionService
from tests.conftest import Db
from tests.factories import queue

NOW = 1_700_000_000_000 // HOUR_MS * HOUR_MS  # on an hour boundary
MINUTE = 60_000
WINDOWS = Windows(raw_days=2 / 24, hourly_days=10 / 24, decision_days=5 / 24)


def _node(node_id: str, used: int) -> NodeState:
    used_now = Resources(used, 0)
    return NodeState(node_id, node_id, "/r", "RUNNING", (), Resources(8, 8192), used_now, 0)


def _seed(db: Db) -> None:
    """12 hours of samples, one a minute, for root.a and root.b (used_vcores = minute index)."""
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], NOW).id
        for m in range(12 * 60):
            t = NOW - 12 * HOUR_MS + m * MINUTE
            qs = [queue("root.a", used_vcores=m), queue("root.b", used_vcores=2 * m)]
            repo.add_queue_samples(s, repo.upsert_queues(s, cid, qs, t), qs, t)
        # node n1 changed 11 h and 9 h ago, n2 only 11 h ago (that row is its current state)
        repo.add_node_samples(s, cid, [_node("n1", 1), _node("n2", 1)], NOW - 11 * HOUR_MS)
        repo.add_node_samples(s, cid, [_node("n1", 2)], NOW - 9 * HOUR_MS)
        repo.add_node_samples(s, cid, [_node("n1", 3)], NOW - 9 * HOUR_MS + 10 * MINUTE)
        repo.add_node_samples(s, cid, [_node("n1", 4)], NOW - 30 * MINUTE)  # raw: kept
        old = repo.add_decision(
            s, Decision(cluster_id=cid, created_ms=NOW - 6 * HOUR_MS, kind="queue", policy="x",
                        mode="enforce", params={}, inputs={}, outputs={}, status="pushed",
                        reason="old"),
        )  # fmt: skip
        s.add(ConfigPush(cluster_id=cid, decision_id=old.id, pushed_ms=NOW - 6 * HOUR_MS,
                         parent="root", values={}, previous={}, status="applied"))  # fmt: skip
        repo.add_decision(
            s, Decision(cluster_id=cid, created_ms=NOW - HOUR_MS, kind="queue", policy="x",
                        mode="enforce", params={}, inputs={}, outputs={}, status="pushed",
                        reason="new"),
        )  # fmt: skip


def _samples(db: Db) -> list[tuple[int, int, int]]:
    with db.sessions() as s:
        rows = s.execute(
            select(QueueSample.queue_id, QueueSample.taken_ms, QueueSample.used_vcores).order_by(
                QueueSample.queue_id, QueueSample.taken_ms
            )
        )
        return [(int(q), int(t), int(v)) for q, t, v in rows]


def test_raw_then_hourly_means_then_nothing(db: Db) -> None:
    _seed(db)
    before = _samples(db)
    service = RetentionService(db.sessions, WINDOWS, interval_s=3600, batch=100)
    pruned = service.prune(NOW)
    after = _samples(db)
    queues = sorted({q for q, _, _ in before})
    a = queues[0]
    for q in queues:
        mine = [(t, v) for qq, t, v in after if qq == q]
        # beyond 10 h: nothing; 10 h to 2 h ago: one row an hour; the last 2 h: every minute
        assert all(t >= NOW - 10 * HOUR_MS for t, _ in mine)
        hourly = [(t, v) for t, v in mine if t < NOW - 2 * HOUR_MS]
        raw = [(t, v) for t, v in mine if t >= NOW - 2 * HOUR_MS]
        assert len(hourly) == 8 and len(raw) == 120
        assert raw == [(t, v) for qq, t, v in before if qq == q and t >= NOW - 2 * HOUR_MS]
        # the hour's mean: minutes 120..179 (10 h ago) have used_vcores 120..179 for root.a
        start = NOW - 10 * HOUR_MS
        first_hour = [v for qq, t, v in before if qq == q and start <= t < start + HOUR_MS]
        assert hourly[0] == (NOW - 10 * HOUR_MS, round(sum(first_hour) / len(first_hour)))
    assert next(v for qq, t, v in after if qq == a) == round(sum(range(120, 180)) / 60)
    assert pruned.deleted_rows["queue_samples"] == len(before) - len(after)
    with db.sessions() as s:
        nodes = s.execute(select(NodeSample.node_id, NodeSample.used_vcores))
        # n1: its last record of the hour 9 h ago, and its raw recent one; n2: its only one
        assert sorted((n, v) for n, v in nodes) == [("n1", 3), ("n1", 4), ("n2", 1)]
        assert [d.reason for d in s.scalars(select(Decision))] == ["new"]
        assert s.scalar(select(func.count()).select_from(ConfigPush)) == 1
        assert s.scalar(select(ConfigPush.decision_id)) is None
    # idempotent: a second run (a new process, no scan position) changes nothing
    again = RetentionService(db.sessions, WINDOWS, interval_s=3600, batch=100).prune(NOW)
    assert again.total_rows == 0 and _samples(db) == after


def test_ticks_that_changed_nothing_go_with_the_raw_window(db: Db) -> None:
    """A tick's row carries its inputs (about 1.5 KB a queue, one a minute): the ticks that did
    nothing are kept for the raw window, the ones that did something for the decision window."""
    ages = {"3h": NOW - 3 * HOUR_MS, "1h": NOW - HOUR_MS}
    kinds = [("queue", "no_change"), ("queue", "static"), ("queue", "observe"),
             ("queue", "pushed"), ("queue", "drift"), ("placement", "decided")]  # fmt: skip
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], NOW).id
        for age, at in ages.items():
            for kind, status in kinds:
                repo.add_decision(
                    s, Decision(cluster_id=cid, created_ms=at, kind=kind, policy="x",
                                mode="enforce", params={}, inputs={}, outputs={}, status=status,
                                reason=age),
                )  # fmt: skip
    pruned = RetentionService(db.sessions, WINDOWS, interval_s=3600, batch=100).prune(NOW)
    with db.sessions() as s:
        kept = sorted((d.reason, d.kind, d.status) for d in s.scalars(select(Decision)))
    # beyond the raw window (2 h) only the routine ticks are gone; inside it all are kept
    assert kept == sorted(
        [("1h", k, st) for k, st in kinds]
        + [("3h", k, st) for k, st in kinds if st not in ("no_change", "static", "observe")]
    )
    assert pruned.deleted_rows["decisions"] == 3
