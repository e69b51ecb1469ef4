"""Database size with and without retention, measured: 1,000 nodes and 200 queues polled every
10 s, projected to 30 days; and what a ``/metrics`` scrape pays for the deadline jobs' history
(a million job decisions) before and after retention tallied it.

One simulated hour of polls is written through the repository functions the poller uses (queue
samples, cluster totals, node change records for the nodes whose usage changed, poll records)
into a real SQLite file and a real PostgreSQL database; the bytes each row costs are measured
(file size, or ``pg_total_relation_size``), then retention (``app.db.retention``) is run on that
hour as if it were older than the raw window, to measure what it keeps. The table projects 30
days without retention and with the defaults (7 days raw, hourly beyond).

The scrape part writes ``--job-decisions`` job decisions, four per ended job, a month old, and a
hundred live jobs; it times the job counts as a scrape made them before (every job and job
decision grouped), the whole database part of a scrape (``observe_repo.snapshot``) before
retention ran, the retention passes that tally the history (default batch), and the scrape
after them, which must report the same counts.

Run: ``.venv/bin/python benchmarks/bench_retention.py [--db sqlite,postgresql] [--nodes 1000]
[--queues 200] [--node-change 0.5] [--job-decisions 1000000]`` (PostgreSQL: ``--pg-url`` or
``YARN_SIDECAR_TEST_PG_URL``, an admin URL; a database is created and dropped).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, func, insert, select, text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.db import observe_repo, poll_writes, repo
from app.db.jobs_models import Job, JobDecision
from app.db.migrate import upgrade
from app.db.models import ClusterSample, NodeSample, PollRecord, QueueSample
from app.db.retention import DAY_MS, HOUR_MS, Windows, prune_step
from app.db.session import make_engine, make_session_factory, transaction
from app.domain.model import NodeState, QueueState, Resources

POLL_S = 10
TABLES = (QueueSample, ClusterSample, NodeSample, PollRecord)


def _queues(n: int, tick: int) -> list[QueueState]:
    out = []
    for i in range(n):
        used = (i * 7 + tick) % 50
        out.append(
            QueueState(
                path=f"root.q{i:03d}", name=f"q{i:03d}", parent="root", is_leaf=True,
                state="RUNNING", capacity=100 / n, max_capacity=100.0, used_capacity=used,
                absolute_capacity=100 / n, absolute_max_capacity=100.0,
                absolute_used_capacity=used / n, used=Resources(used, used * 1024),
                pending=Resources(tick % 5, 0), num_applications=1, num_active_apps=1,
                num_pending_apps=0, pending_containers=tick % 5, allocated_containers=used,
            )
        )  # fmt: skip
    return out


def _nodes(n: int, tick: int, changing: float) -> list[NodeState]:
    step = max(1, round(1 / changing)) if changing > 0 else n + 1
    return [
        NodeState(f"n{i:05d}:8041", f"n{i:05d}", "/rack", "RUNNING", (), Resources(32, 131072),
                  Resources((i + tick // step) % 32, 4096), 3)
        for i in range(n)
    ]  # fmt: skip


def _size(url: str, engine: object) -> int:
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        with engine.connect() as conn:  # type: ignore[attr-defined]
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        return path.stat().st_size
    with engine.connect() as conn:  # type: ignore[attr-defined]
        names = ", ".join(f"'{t.__tablename__}'" for t in TABLES)
        return int(
            conn.execute(
                text(f"SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                     f"WHERE relname IN ({names})")
            ).scalar_one()
        )  # fmt: skip


def _rows(sessions: object) -> dict[str, int]:
    with sessions() as s:  # type: ignore[operator]
        return {t.__tablename__: s.scalar(select(func.count()).select_from(t)) for t in TABLES}


def measure(url: str, nodes: int, queues: int, changing: float) -> dict[str, float]:
    upgrade(url)
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    t0 = 1_700_000_000_000 // HOUR_MS * HOUR_MS
    with transaction(sessions) as s:
        cid = repo.ensure_cluster(s, "bench", ["http://rm:8088"], t0).id
    empty = _size(url, engine)
    polls = 3600 // POLL_S
    previous: dict[str, NodeState] = {}
    started = time.monotonic()
    for tick in range(polls):
        now = t0 + tick * POLL_S * 1000
        qs = _queues(queues, tick)
        ns = _nodes(nodes, tick, changing)
        changed = [n for n in ns if previous.get(n.node_id) != n]
        previous = {n.node_id: n for n in ns}
        with transaction(sessions) as s:
            repo.add_queue_samples(s, repo.upsert_queues(s, cid, qs, now), qs, now)
            # as the poller writes them: every node's totals, the changed nodes' rows
            poll_writes.add_cluster_sample(s, cid, poll_writes.node_totals(ns), now)
            poll_writes.add_node_rows(s, cid, changed, now)
            poll = PollRecord(cluster_id=cid, started_ms=now, duration_ms=100, ok=True)
            repo.record_poll(s, poll)
    wrote_s = time.monotonic() - started
    hour_bytes = _size(url, engine) - empty
    rows_before = _rows(sessions)
    # retention as if the hour were older than the raw window (and inside the hourly one)
    windows = Windows(raw_days=1 / 24, hourly_days=30, decision_days=30)
    since: dict[str, int] = {}
    while True:
        with transaction(sessions) as s:
            step = prune_step(s, windows, t0 + 2 * HOUR_MS + 1, batch=50_000, since=since)
        if not step.more:
            break
    rows_after = _rows(sessions)
    engine.dispose()
    rows_hour = sum(rows_before.values())
    kept = sum(rows_after.values()) / rows_hour
    per_day = hour_bytes * 24
    day_hourly = per_day * kept
    return {
        "rows_hour": rows_hour,
        "bytes_row": hour_bytes / rows_hour,
        "per_day": per_day,
        "kept": kept,
        "no_retention_30d": 30 * per_day,
        "retention_30d": 7 * per_day + 23 * day_hourly,
        "write_s": wrote_s,
        "rows_before": rows_before,  # type: ignore[dict-item]
        "rows_after": rows_after,  # type: ignore[dict-item]
    }


ENDED = (("finished", True), ("finished", False), ("dropped", None), ("killed", False))
STEPS = ("queue", "admit", "submit", "finish")


def _timed(run: Callable[[], object], repeat: int = 3) -> float:
    """Median seconds of ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _job(i: int, state: str, met: bool | None, at_ms: int) -> dict[str, Any]:
    return {
        "id": f"{i:032x}", "name": f"job {i % 100}", "queue": "root.deadline", "state": state,
        "requested_tasks": 8, "input_bytes": None, "block_size": None, "deadline_s": 600.0,
        "deadline_ms": at_ms + 600_000, "submitted_ms": at_ms, "run": {}, "tags": [],
        "idempotency_key": None, "idempotency_owner": "", "request_hash": "0" * 64,
        "granted_cpus": 4, "met_deadline": met, "timeout_set": False, "reason": "",
        "updated_ms": at_ms + 60_000, "owner": "alice",
    }  # fmt: skip


def _step(i: int, job_id: str, action: str, at_ms: int) -> dict[str, Any]:
    return {
        "job_id": job_id, "created_ms": at_ms, "action": action, "policy": "justice", "cpus": 4,
        "reason": f"request of {i % 50} CPUs does not fit in {i % 7} free", "numbers": {},
        "principal": "alice",
    }  # fmt: skip


def _former_job_counts(session: Any) -> object:
    """The job counts as every scrape made them before: the whole tables grouped."""
    return (
        session.execute(select(Job.state, func.count()).group_by(Job.state)).all(),
        session.execute(
            select(Job.met_deadline, func.count())
            .where(Job.met_deadline.is_not(None))
            .group_by(Job.met_deadline)
        ).all(),
        session.execute(
            select(JobDecision.action, JobDecision.reason, func.count()).group_by(
                JobDecision.action, JobDecision.reason
            )
        ).all(),
    )


def _job_numbers(snap: observe_repo.Snapshot) -> tuple[Any, ...]:
    return snap.jobs_by_state, snap.deadlines, snap.admission


def measure_scrape(url: str, decisions: int) -> dict[str, float]:
    """A scrape's cost with ``decisions`` job decisions, before and after retention tallied them."""
    upgrade(url)
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    now = 1_700_000_000_000 // HOUR_MS * HOUR_MS
    month = now - 30 * DAY_MS
    ended = max(1, decisions // len(STEPS))
    with transaction(sessions) as s:
        repo.ensure_cluster(s, "bench", ["http://rm:8088"], now)
    started = time.monotonic()
    chunk = 10_000
    for first in range(0, ended + 100, chunk):
        ids = range(first, min(first + chunk, ended + 100))
        jobs = [
            _job(i, *ENDED[i % len(ENDED)], month + i)
            if i < ended
            else _job(i, ("queued", "submitted")[i % 2], None, now - HOUR_MS)  # live
            for i in ids
        ]
        steps = [
            _step(i, j["id"], a, j["submitted_ms"])
            for i, j in zip(ids, jobs, strict=True)
            for a in STEPS
        ]
        with transaction(sessions) as s:
            s.execute(insert(Job), jobs)
            s.execute(insert(JobDecision), steps)
    wrote_s = time.monotonic() - started
    with engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    with sessions() as s:
        rows = s.scalar(select(func.count()).select_from(JobDecision)) or 0
        former_s = _timed(lambda: _former_job_counts(s))
        before_s = _timed(lambda: observe_repo.snapshot(s, "bench"))
        before = _job_numbers(observe_repo.snapshot(s, "bench"))
    started = time.monotonic()
    since: dict[str, int] = {}
    passes = 0
    while True:  # the retention loop's steps with its default batch, until none has work left
        with transaction(sessions) as s:
            step = prune_step(s, Windows(), now, batch=5000, since=since)
        passes += 1
        if not step.more:
            break
    tally_s = time.monotonic() - started
    with engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    with sessions() as s:
        after_s = _timed(lambda: observe_repo.snapshot(s, "bench"))
        after = _job_numbers(observe_repo.snapshot(s, "bench"))
    engine.dispose()
    if after != before:
        raise SystemExit(f"the counts changed: {before} -> {after}")
    return {
        "decisions": rows,
        "jobs": ended + 100,
        "write_s": wrote_s,
        "former_s": former_s,
        "before_s": before_s,
        "tally_s": tally_s,
        "steps": passes,
        "after_s": after_s,
    }


@contextmanager
def _database(db: str, pg_url: str | None) -> Iterator[str | None]:
    """A fresh database URL on ``db`` (None: PostgreSQL without a server URL), removed after."""
    if db == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{tmp}/b.db"
        return
    if not pg_url:
        yield None
        return
    admin = create_engine(make_url(pg_url).set(drivername="postgresql+psycopg"),
                          isolation_level="AUTOCOMMIT")  # fmt: skip
    name = f"bench_{uuid.uuid4().hex[:8]}"
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default="sqlite,postgresql")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--queues", type=int, default=200)
    ap.add_argument("--node-change", type=float, default=0.5,
                    help="share of nodes whose usage changes between two polls")  # fmt: skip
    ap.add_argument("--job-decisions", type=int, default=1_000_000,
                    help="job decisions in the scrape part (0: skip it)")  # fmt: skip
    ap.add_argument("--pg-url", default=os.environ.get("YARN_SIDECAR_TEST_PG_URL"))
    args = ap.parse_args()
    results = {}
    scrapes = {}
    for db in args.db.split(","):
        with _database(db, args.pg_url) as url:
            if url is None:
                print("postgresql: skipped (no --pg-url / YARN_SIDECAR_TEST_PG_URL)")
                continue
            results[db] = measure(url, args.nodes, args.queues, args.node_change)
        if args.job_decisions > 0:
            with _database(db, args.pg_url) as url:
                assert url is not None
                scrapes[db] = measure_scrape(url, args.job_decisions)
    mb = 1024 * 1024
    print(
        f"{args.nodes} nodes, {args.queues} queues, {POLL_S} s poll, {args.node_change:.0%} of "
        "nodes changing per poll; 30 days = 7 raw + 23 hourly"
    )
    print("| database | rows per hour | bytes per row | MB per day (raw) | kept by hourly "
          "| 30 days, no retention | 30 days, retention |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for db, r in results.items():
        print(f"| {db} | {r['rows_hour']:,.0f} | {r['bytes_row']:.0f} | {r['per_day'] / mb:,.0f} "
              f"| {r['kept']:.1%} | {r['no_retention_30d'] / mb / 1024:,.1f} GB "
              f"| {r['retention_30d'] / mb / 1024:,.2f} GB |")  # fmt: skip
    for db, r in results.items():
        print(f"{db}: rows in the hour {r['rows_before']}; after downsampling {r['rows_after']}")
    if not scrapes:
        return
    print()
    print("/metrics' job counts over the deadline jobs' history (medians of 3; the counts after "
          "equal those before)")  # fmt: skip
    print("| database | job decisions | jobs | former job counts | scrape before retention "
          "| retention passes to tally | scrape after |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for db, r in scrapes.items():
        print(f"| {db} | {r['decisions']:,.0f} | {r['jobs']:,.0f} | {r['former_s']:.3f} s "
              f"| {r['before_s']:.3f} s | {r['tally_s']:.1f} s in {r['steps']:.0f} steps "
              f"| {r['after_s'] * 1000:.1f} ms |")  # fmt: skip


if __name__ == "__main__":
    main()
