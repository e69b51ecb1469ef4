"""What Promise's estimator costs to bring up to date as its history grows, and what a change of
the cluster's capacity costs (``app.db.promise_history.EstimatorCache``).

Admission refreshes the estimator in every round, holding the admission lock that ``POST /jobs``
also takes. The capacity it reads is the running NodeManagers' vcores, so a NodeManager joining
or leaving changes it. Per history size the table gives the first load (every observation read
and learned: a start-up), a refresh with nothing new, a refresh after one NodeManager (8 vcores)
left when no run learned had more tasks than the capacity (nothing to relearn), and a full
rebuild, which is what every capacity change cost before and still costs when a run learned was
wider than the old or the new capacity. The last two columns are what a submission's round
waits for the estimator while a restart's first load holds it (before, the whole load; now it
answers queued, ``app.jobs.promise_memory``), and what ``GET /estimator``'s per-signature view
costs once the estimator is loaded (before, a whole load on every call), and the most memory
the first load held (it read the whole history into one list before).

The database is a temp SQLite file (or a PostgreSQL database made from ``--database-url`` and
dropped after) holding N finished apps of 50 signatures, each with its observation (10 to 400
tasks, so narrower than the 800-vcore cluster).

Run: ``.venv/bin/python benchmarks/bench_estimator_refresh.py [--observations 1000,20000,100000]
[--database-url postgresql://...]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import insert
from sqlalchemy.orm import Session, sessionmaker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_jobs_api import database

from app.db.jobs_models import EstimatorObservation
from app.db.migrate import upgrade
from app.db.models import Application, Cluster
from app.db.promise_history import EstimatorCache
from app.db.session import make_engine, make_session_factory, transaction
from app.jobs.promise_memory import PromiseMemory
from app.policies.promise.estimator import EstimatorParams

CAPACITY = 800
NODE_VCORES = 8
BATCH = 5_000


def _fill(sessions: sessionmaker[Session], n: int) -> None:
    with transaction(sessions) as s:
        cluster = Cluster(name="bench", rm_urls="http://rm", first_seen_ms=0)
        s.add(cluster)
        s.flush()
        cid = cluster.id
    for start in range(0, n, BATCH):
        ids = range(start, min(n, start + BATCH))
        apps = [
            dict(
                app_id=f"application_1_{i:07d}", cluster_id=cid, user=f"u{i % 7}",
                queue="root.deadline", name=f"etl-{i % 50}", app_type="MAPREDUCE", tags=",",
                state="FINISHED", final_status="SUCCEEDED", elapsed_ms=100_000,
                vcore_seconds=1_000 + (i % 50) * 40, first_seen_ms=0, updated_ms=0,
                launched_ms=0, finished_ms=10_000,
            )
            for i in ids
        ]  # fmt: skip
        observations = [
            dict(
                app_id=f"application_1_{i:07d}", source="tagged", observed_ms=1_000 + i,
                learned=True, censored=False, tasks=10 + (i % 50) * 8, deadline_s=600.0,
                comp_time=900.0 + (i % 50) * 40, cpus=10, success=True,
            )
            for i in ids
        ]  # fmt: skip
        with transaction(sessions) as s:
            s.execute(insert(Application), apps)
            s.execute(insert(EstimatorObservation), observations)


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(url: str, n: int) -> dict[str, float]:
    upgrade(url)
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    try:
        _fill(sessions, n)
        params = EstimatorParams()
        cache = EstimatorCache(params)
        with sessions() as s:
            first = _timed(lambda: cache.refresh(s, CAPACITY))
            idle = _timed(lambda: cache.refresh(s, CAPACITY))
            node_left = _timed(lambda: cache.refresh(s, CAPACITY - NODE_VCORES))
            rebuild = _timed(lambda: EstimatorCache(params).refresh(s, CAPACITY - NODE_VCORES))
        wait, view, peak = _while_loading(sessions)
        return {
            "first": first, "idle": idle, "node_left": node_left, "rebuild": rebuild,
            "wait": wait, "view": view, "peak": peak,
        }  # fmt: skip
    finally:
        engine.dispose()


def _while_loading(sessions: sessionmaker[Session]) -> tuple[float, float, float]:
    """What a submission's round waits for the estimator while a restart's load holds it (it
    waited for the whole load before), ``GET /estimator``'s view once loaded (a whole load on
    every call before), and the most memory Python held during that load (MB; ``tracemalloc``,
    which also slows the load, so it is not the one timed)."""
    memory = PromiseMemory()
    with sessions() as loading, sessions() as s:
        loader = threading.Thread(target=memory.warm, args=(loading, {}, CAPACITY))
        tracemalloc.start()
        loader.start()
        while not memory.loading and loader.is_alive():
            time.sleep(0.001)
        t0 = time.perf_counter()
        with memory.held(unless_loading=True):
            wait = time.perf_counter() - t0  # a small history may be loaded before it asks
        loader.join()
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()

        def view() -> None:
            with memory.held():
                est = memory.estimator(s, {}, CAPACITY)
                assert est is not None  # loaded above, and no warmer set
                est.entries(), est.totals()

        return wait, _timed(view), peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--observations", default="1000,20000,100000")
    parser.add_argument("--database-url", help="an admin PostgreSQL URL (default: temp SQLite)")
    args = parser.parse_args()
    sizes = [int(x) for x in args.observations.split(",")]
    print(f"capacity {CAPACITY} vcores; one NodeManager = {NODE_VCORES} vcores\n")
    print("| observations | first load s | refresh, nothing new ms | "
          "a NodeManager left ms | full rebuild s | a submission's wait during the load ms | "
          "GET /estimator's view ms | first load's peak memory MB |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            with database(args.database_url, tmp, f"est{n}") as url:
                r = measure(url, n)
            print(
                f"| {n:,} | {r['first']:.2f} | {r['idle'] * 1000:.1f} | "
                f"{r['node_left'] * 1000:.1f} | {r['rebuild']:.2f} | "
                f"{r['wait'] * 1000:.1f} | {r['view'] * 1000:.1f} | {r['peak']:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
