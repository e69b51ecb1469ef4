"""What a submission batch costs the service itself: ``AdmissionService.create_job``'s batches
(``_create_many``: the key lookup, the policy read, the estimator lock, the incremental Justice
round and the inserts, one transaction), called in one process without HTTP, on a real
database.

Per database and batch size it prints the CPU time and the wall time per job, the median of
``--repeats`` blocks of ``--jobs`` jobs. The database (a temp SQLite file, or a PostgreSQL
database made from ``--database-url`` and dropped after) holds 100 queued jobs and the deadline
capacity held by one admitted job, as in ``bench_admission_round.py``, so every submission is
decided incrementally and queued. ``bench_jobs_api.py`` measures the same path over HTTP, where
the web framework's share comes on top.

Run: ``.venv/bin/python benchmarks/bench_submission.py [--batches 1,3] [--jobs 900]
[--repeats 3] [--database-url postgresql://...]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_admission_round import T0, _cfg, _fill
from bench_jobs_api import RUN, database

from app.db.migrate import upgrade
from app.db.session import make_engine, make_session_factory
from app.services.admission import AdmissionService, NewJob
from app.services.admission.common import ServiceOptions


def _new(n: int) -> NewJob:
    return NewJob(
        name=f"job-{n}", queue="root.deadline", deadline_ms=T0 + 3_600_000, requested_tasks=4,
        input_bytes=None, block_size=None, run=RUN, tags=("bench",), idempotency_key=f"key-{n}",
        request_hash=f"hash-{n}", owner="bench", principal="bench",
    )  # fmt: skip


def measure(url: str, batch: int, jobs: int, repeats: int) -> tuple[float, float]:
    """Median CPU and wall milliseconds per job over ``repeats`` blocks of ``jobs`` jobs."""
    upgrade(url)
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    try:
        _fill(sessions, 100)
        service = AdmissionService(
            None,  # type: ignore[arg-type]  # a submission round never calls the RM
            sessions,
            _cfg(),
            ServiceOptions(rm_urls=("http://rm:8088",)),
            interval_s=1,
            clock=lambda: T0,
        )
        n = 0
        for _ in range(50):  # warm: compiled statements, pooled connections
            service._create_many([(_new(n), T0 + n)])
            n += 1
        cpu: list[float] = []
        wall: list[float] = []
        for _ in range(repeats):
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(jobs // batch):
                service._create_many([(_new(n + i), T0 + n + i) for i in range(batch)])
                n += batch
            done = jobs // batch * batch
            cpu.append((time.process_time() - c0) * 1000 / done)
            wall.append((time.perf_counter() - w0) * 1000 / done)
    finally:
        engine.dispose()
    return statistics.median(cpu), statistics.median(wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", default="1,3", help="comma-separated batch sizes")
    parser.add_argument("--jobs", type=int, default=900, help="jobs per block")
    parser.add_argument("--repeats", type=int, default=3, help="blocks per batch size")
    parser.add_argument("--database-url", help="PostgreSQL admin URL (default: temp SQLite)")
    args = parser.parse_args()
    engine_name = "postgresql" if args.database_url else "sqlite"
    print(f"{'db':<11}{'batch':>6}{'jobs':>7}{'CPU ms/job':>12}{'wall ms/job':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        for batch in (int(x) for x in args.batches.split(",")):
            with database(args.database_url, tmp, f"submit{batch}") as url:
                cpu, wall = measure(url, batch, args.jobs, args.repeats)
            print(f"{engine_name:<11}{batch:>6}{args.jobs:>7}{cpu:>12.2f}{wall:>13.2f}")


if __name__ == "__main__":
    main()
