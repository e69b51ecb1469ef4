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

The steady-state part writes ``--kept-jobs`` ended jobs older than the decision window, each
with its YARN application (kept for good) and two decisions, a tenth as many older jobs dropped
before submission (no app: deleted), a hundred live ones, and ``--ledger-rows`` ledger rows
inside the hourly window; retention catches up, then one step with nothing left to delete is
timed (median of 3), whole and its job and ledger statements: the cost every hourly run pays.

Run: ``.venv/bin/python benchmarks/bench_retention.py [--db sqlite,postgresql] [--nodes 1000]
[--queues 200] [--node-change 0.5] [--job-decisions 1000000] [--kept-jobs N] [--ledger-rows N]``
(PostgreSQL: ``--pg-url`` or ``YARN_SIDECAR_TEST_PG_URL``, an admin URL; a database is created
and dropped).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import func, insert, select, text
from sqlalchemy.orm import Session, sessionmaker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_jobs_api import database

from app.db import observe_repo, poll_writes, repo
from app.db.control_models import LedgerEntry
from app.db.jobs_models import Job, JobDecision
from app.db.migrate import upgrade
from app.db.models import Application, ClusterSample, NodeSample, PollRecord, QueueSample
from app.db.retention import (
    DAY_MS,
    HOUR_MS,
    Windows,
    _delete_old_ledger,
    _prune_jobs,
    prune_step,
)
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


ENDED: tuple[tuple[str, bool | None], ...] = (
    ("finished", True), ("finished", False), ("dropped", None), ("killed", False),
)  # fmt: skip
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
    tally_s, passes, _ = _until_done(engine, sessions, Windows(), now)
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


def _app(i: int, cluster_id: int, at_ms: int) -> dict[str, Any]:
    return {
        "app_id": f"application_1_{i:08d}", "cluster_id": cluster_id, "user": "alice",
        "queue": "deadline", "name": f"job {i % 100}", "app_type": "SPARK", "tags": ",",
        "state": "FINISHED", "final_status": "SUCCEEDED", "submitted_ms": at_ms,
        "finished_ms": at_ms + 50_000, "first_seen_ms": at_ms, "updated_ms": at_ms + 50_000,
    }  # fmt: skip


def _ledger_row(k: int, cluster_id: int, queues: int, first_ms: int) -> dict[str, Any]:
    tick, q = divmod(k, queues)
    start = first_ms + tick * 60_000
    return {
        "cluster_id": cluster_id, "queue": f"root.q{q:03d}", "start_ms": start,
        "end_ms": start + 60_000, "weight": 1.0, "entitlement": 1.0, "usage": 1.0,
        "counted": 1.0, "debt": 0.0, "total_usage": 1.0, "total_counted": 1.0, "lent": 0.0,
        "borrowed": 0.0, "lent_to": {},
    }  # fmt: skip


def measure_steady(url: str, kept: int, ledger: int, queues: int) -> dict[str, float]:
    """One retention step's cost once it has nothing to delete, over ``kept`` jobs older than
    the decision window that stay (each has an app) and ``ledger`` ledger rows in the window."""
    upgrade(url)
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    now = 1_700_000_000_000 // HOUR_MS * HOUR_MS
    windows = Windows()
    old = now - int(windows.decision_days * DAY_MS) - 30 * DAY_MS
    with transaction(sessions) as s:
        cid = repo.ensure_cluster(s, "bench", ["http://rm:8088"], now).id
    dropped = max(1, kept // 10)
    started = time.monotonic()
    chunk = 10_000
    total = kept + dropped + 100
    for first in range(0, total, chunk):
        ids = range(first, min(first + chunk, total))
        jobs, apps = [], []
        for i in ids:
            at = old + i * 1000
            if i < kept:  # ran on YARN: kept for good, with its app
                jobs.append({**_job(i, *ENDED[i % 2], at), "app_id": f"application_1_{i:08d}"})
                apps.append(_app(i, cid, at))
            elif i < kept + dropped:  # dropped before submission: goes
                jobs.append(_job(i, "dropped", None, at))
            else:  # live
                jobs.append(_job(i, ("queued", "submitted")[i % 2], None, now - HOUR_MS))
        steps = [_step(i, j["id"], a, j["submitted_ms"]) for i, j in zip(ids, jobs, strict=True)
                 for a in STEPS[:2]]  # fmt: skip
        with transaction(sessions) as s:
            if apps:
                s.execute(insert(Application), apps)
            s.execute(insert(Job), jobs)
            s.execute(insert(JobDecision), steps)
    # the newest ``ledger`` rows of ``queues`` queues, all inside the hourly window
    ticks = -(-ledger // queues)
    first_ms = now - ticks * 60_000
    for first in range(0, ledger, 20_000):
        rows = [
            _ledger_row(k, cid, queues, first_ms) for k in range(first, min(first + 20_000, ledger))
        ]
        with transaction(sessions) as s:
            s.execute(insert(LedgerEntry), rows)
    wrote_s = time.monotonic() - started
    with engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    catch_up_s, passes, since = _until_done(engine, sessions, windows, now)
    with sessions() as s:
        left = s.scalar(select(func.count()).select_from(Job)) or 0
    if left != kept + 100:
        raise SystemExit(f"retention kept {left} jobs, not the {kept + 100} with an app or live")
    decision_cut = now - int(windows.decision_days * DAY_MS)
    hourly_cut = now - int(windows.hourly_days * DAY_MS)

    def timed_step(run: Callable[[Any], object]) -> float:
        def once() -> None:
            with transaction(sessions) as s:
                run(s)

        return _timed(once)

    out = {
        "kept": kept, "dropped": dropped, "ledger": ledger, "write_s": wrote_s,
        "catch_up_s": catch_up_s, "steps": passes,
        "step_s": timed_step(lambda s: prune_step(s, windows, now, batch=5000, since=since)),
        "jobs_s": timed_step(lambda s: _prune_jobs(s, decision_cut, 5000)),
        "ledger_s": timed_step(lambda s: _delete_old_ledger(s, hourly_cut, 5000)),
    }  # fmt: skip
    engine.dispose()
    return out


def _until_done(
    engine: Any, sessions: sessionmaker[Session], windows: Windows, now: int
) -> tuple[float, int, dict[str, int]]:
    """The retention loop's steps with its default batch until none has work left, then fresh
    planner statistics: (seconds, steps, where each downsampling scan resumes)."""
    started = time.monotonic()
    since: dict[str, int] = {}
    passes = 0
    while True:
        with transaction(sessions) as s:
            step = prune_step(s, windows, now, batch=5000, since=since)
        passes += 1
        if not step.more:
            break
    seconds = time.monotonic() - started
    with engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    return seconds, passes, since


@contextmanager
def _database(db: str, pg_url: str | None) -> Iterator[str | None]:
    """A fresh database URL on ``db`` (None: PostgreSQL without a server URL), removed after."""
    if db != "sqlite" and not pg_url:
        yield None
        return
    engine_url = pg_url if db != "sqlite" else None
    with tempfile.TemporaryDirectory() as tmp, database(engine_url, tmp, "retention") as url:
        yield url


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default="sqlite,postgresql")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--queues", type=int, default=200)
    ap.add_argument("--node-change", type=float, default=0.5,
                    help="share of nodes whose usage changes between two polls")  # fmt: skip
    ap.add_argument("--job-decisions", type=int, default=1_000_000,
                    help="job decisions in the scrape part (0: skip it)")  # fmt: skip
    ap.add_argument("--kept-jobs", type=int, default=None,
                    help="ended jobs with an app older than the decision window in the steady-"
                    "state part (default: --job-decisions / 4; 0: skip it)")  # fmt: skip
    ap.add_argument(
        "--ledger-rows",
        type=int,
        default=None,
        help="ledger rows in the steady-state part (default: --job-decisions)",
    )
    ap.add_argument("--pg-url", default=os.environ.get("YARN_SIDECAR_TEST_PG_URL"))
    args = ap.parse_args()
    kept = args.job_decisions // 4 if args.kept_jobs is None else args.kept_jobs
    ledger = args.job_decisions if args.ledger_rows is None else args.ledger_rows
    results = {}
    scrapes = {}
    steady = {}
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
        if kept > 0:
            with _database(db, args.pg_url) as url:
                assert url is not None
                steady[db] = measure_steady(url, kept, ledger, args.queues)
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
    _print_scrapes(scrapes)
    _print_steady(steady)


def _print_scrapes(scrapes: dict[str, dict[str, float]]) -> None:
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


def _print_steady(steady: dict[str, dict[str, float]]) -> None:
    if not steady:
        return
    print()
    print("A retention step with nothing left to delete, over jobs kept beyond the decision "
          "window (medians of 3)")  # fmt: skip
    print("| database | kept jobs | dropped jobs deleted | ledger rows | catch-up "
          "| whole step | job statements | ledger statements |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for db, r in steady.items():
        print(f"| {db} | {r['kept']:,.0f} | {r['dropped']:,.0f} | {r['ledger']:,.0f} "
              f"| {r['catch_up_s']:.1f} s in {r['steps']:.0f} steps | {r['step_s'] * 1000:.1f} ms "
              f"| {r['jobs_s'] * 1000:.1f} ms | {r['ledger_s'] * 1000:.1f} ms |")  # fmt: skip


if __name__ == "__main__":
    main()
