"""The latest sample of each queue (``GET /queues``, every ``/metrics`` scrape): read by one indexed
lookup per queue whatever the length of the history, and only the queues the latest poll reported
exported to Prometheus."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import event, insert, text

from app.db import repo
from app.db.models import QueueSample
from app.db.session import transaction
from app.domain.model import QueueState
from app.observability.prometheus import SidecarCollector
from tests.conftest import Db
from tests.factories import queue

CLUSTER = "test"
PATHS = ("root", "root.a", "root.b", "root.c")
POLLS = 1500  # samples per queue: far more than the queues, so a scan shows in the row counts


def _poll(db: Db, cid: int, queues: Sequence[QueueState], taken_ms: int) -> None:
    """What a successful poll writes of the queues: their rows, then one sample each."""
    with transaction(db.sessions) as s:
        ids = repo.upsert_queues(s, cid, queues, taken_ms)
        repo.add_queue_samples(s, ids, queues, taken_ms)


def _cluster(db: Db) -> int:
    with transaction(db.sessions) as s:
        return repo.ensure_cluster(s, CLUSTER, ["http://rm:8088"], 1).id


def _long_history(db: Db) -> tuple[int, dict[str, int]]:
    """``POLLS`` polls of the four queues (``root.c`` never sampled at the last one), bulk-written;
    returns the cluster id and each queue's newest sample time."""
    cid = _cluster(db)
    queues = [queue(p, leaf=p != "root") for p in PATHS]
    with transaction(db.sessions) as s:
        ids = repo.upsert_queues(s, cid, queues, 1_000)
        rows = [
            {
                "queue_id": ids[p],
                "taken_ms": 1_000 + 10 * i,
                "capacity": 25.0,
                "max_capacity": 100.0,
                "used_capacity": float(i % 100),
                "absolute_capacity": 25.0,
                "absolute_used_capacity": 0.0,
                "used_vcores": i,
                "used_memory_mb": i * 1024,
                "pending_vcores": 0,
                "pending_memory_mb": 0,
                "pending_containers": 0,
                "running_apps": 0,
                "pending_apps": 0,
            }
            for i in range(POLLS)
            for p in PATHS
            if not (p == "root.c" and i == POLLS - 1)
        ]
        s.execute(insert(QueueSample), rows)
        if s.get_bind().dialect.name == "postgresql":
            s.execute(text("ANALYZE queue_samples"))
    newest = {p: 1_000 + 10 * (POLLS - 1) for p in PATHS}
    newest["root.c"] -= 10
    return cid, newest


@contextlib.contextmanager
def _statements(db: Db) -> Iterator[list[tuple[str, Any]]]:
    """The SQL text and parameters of every statement run on ``db`` inside the block."""
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        seen.append((statement, params))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", record)


def _rows_read_pg(plan: dict[str, Any]) -> int:
    """Rows the plan's nodes on ``queue_samples`` produced or filtered out, over all loops."""
    n = 0
    if plan.get("Relation Name") == "queue_samples" or plan.get("Index Name", "").startswith(
        "ix_queue_samples"
    ):
        loops = int(plan.get("Actual Loops", 1))
        n += loops * int(plan.get("Actual Rows", 0))
        n += loops * int(plan.get("Rows Removed by Filter", 0))
        n += loops * int(plan.get("Rows Removed by Index Recheck", 0))
    for child in plan.get("Plans", []):
        n += _rows_read_pg(child)
    return n


def test_latest_queues_reads_one_sample_per_queue_through_the_index(db: Db) -> None:
    cid, newest = _long_history(db)
    with _statements(db) as statements, db.sessions() as s:
        views = repo.latest_queues(s, cid)
    # Same answer as before: every queue with its newest sample, by path.
    assert [v.queue.path for v in views] == sorted(PATHS)
    assert {v.queue.path: v.sample.taken_ms for v in views if v.sample} == newest
    assert {v.queue.path: v.sample.used_vcores for v in views if v.sample} == {
        p: (t - 1_000) // 10 for p, t in newest.items()
    }
    reading = [(sql, p) for sql, p in statements if "queue_samples" in sql]
    assert reading, "latest_queues did not read queue_samples"
    with db.engine.connect() as conn:
        for sql, params in reading:
            if db.engine.dialect.name == "sqlite":
                explained = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params)
                plan = [str(row[-1]) for row in explained]
                on_samples = [d for d in plan if "queue_samples" in d]
                # Never a pass over the table or its index (the old GROUP BY queue_id did one):
                # a search by the (queue_id, taken_ms) index, or by primary key.
                assert on_samples and all(d.startswith("SEARCH") for d in on_samples), plan
                assert all(
                    "ix_queue_samples_queue_taken (queue_id=?)" in d or "PRIMARY KEY" in d
                    for d in on_samples
                ), plan
                assert not any("GROUP BY" in d for d in plan), plan
            else:
                out = conn.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
                raw = out.scalar_one()
                doc = raw if isinstance(raw, list) else json.loads(raw)
                read = _rows_read_pg(doc[0]["Plan"])
                # One row per queue, not one per sample (4 queues x 1 500 polls were kept).
                assert read <= len(PATHS), (read, json.dumps(doc, indent=1))


def test_a_queue_without_samples_is_listed_without_one(db: Db) -> None:
    cid = _cluster(db)
    with transaction(db.sessions) as s:
        repo.upsert_queues(s, cid, [queue("root", leaf=False), queue("root.new")], 5)
    _poll(db, cid, [queue("root", leaf=False)], 10)
    with db.sessions() as s:
        views = {v.queue.path: v for v in repo.latest_queues(s, cid)}
    assert views["root.new"].sample is None
    assert views["root"].sample is not None and views["root"].sample.taken_ms == 10


def _exported(db: Db, metric: str = "queue_used_vcores") -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(SidecarCollector(db.sessions, CLUSTER))
    out: dict[str, float] = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name == "yarn_sidecar_" + metric:
                out[sample.labels["queue"]] = sample.value
    return out


def test_metrics_export_only_the_queues_of_the_latest_poll(db: Db) -> None:
    cid = _cluster(db)
    root = queue("root", capacity=100, leaf=False)
    _poll(db, cid, [root, queue("root.a", used_vcores=3), queue("root.u1"), queue("root.u2")], 100)
    assert set(_exported(db)) == {"root", "root.a", "root.u1", "root.u2"}
    # root.u1 was deleted on the RM; root.u2 is idle (listed, nothing running); root.u3 is new.
    _poll(db, cid, [root, queue("root.a", used_vcores=5), queue("root.u2"), queue("root.u3")], 200)
    used = _exported(db)
    assert set(used) == {"root", "root.a", "root.u2", "root.u3"}
    assert used["root.a"] == 5 and used["root.u2"] == 0
    for metric in ("queue_configured_capacity_percent", "queue_drift"):
        assert "root.u1" not in _exported(db, metric)
    assert "root.u1" not in generate_registry_text(db)
    with db.sessions() as s:
        # GET /queues still lists every known queue; the scrape's read leaves the deleted one out.
        assert "root.u1" in {v.queue.path for v in repo.latest_queues(s, cid)}
        current = repo.latest_queues(s, cid, current_only=True)
        assert [v.queue.path for v in current] == ["root", "root.a", "root.u2", "root.u3"]
        assert all(v.sample is not None and v.sample.taken_ms == 200 for v in current)


def test_a_failed_poll_keeps_the_last_reported_queues(db: Db) -> None:
    cid = _cluster(db)
    _poll(db, cid, [queue("root", leaf=False), queue("root.a")], 100)
    with transaction(db.sessions) as s:  # a failed poll writes no queue rows
        cluster = repo.get_cluster(s, CLUSTER)
        assert cluster is not None
        cluster.last_poll_ms, cluster.last_error = 200, "RM unreachable"
    assert set(_exported(db)) == {"root", "root.a"}


def generate_registry_text(db: Db) -> str:
    registry = CollectorRegistry()
    registry.register(SidecarCollector(db.sessions, CLUSTER))
    return generate_latest(registry).decode()
