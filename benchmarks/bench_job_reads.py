"""What reading a queued job costs as the queue grows: ``GET /jobs/{id}`` of queued jobs (and
``GET /estimator``, which shows what admission has booked), per admission policy and queue size.

The app runs in this process (``create_app`` behind httpx's ASGI transport: no sockets, no
admission loops) on a fresh SQLite file or a PostgreSQL database made from ``--database-url``
and dropped after. Per size the database holds that many queued jobs (4 tasks, deadlines a day
away, 50 recurring names); the timed reads are of ``--reads`` of them, after one untimed read,
then ``--reads`` reads of ``/estimator``.
Under Promise a queued job's ETA comes from a plan over every waiting job
(``app.jobs.eta_plans``); under Justice and PYTHIA a read is three indexed queries.

Run: ``.venv/bin/python benchmarks/bench_job_reads.py [--waiting 100,1000,10000]
[--policies justice,promise] [--reads 20] [--database-url postgresql://...]``
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_jobs_api import RUN, database

from app.db.migrate import upgrade
from app.db.session import make_engine, make_session_factory, transaction
from app.main import create_app
from app.services.admission import NewJob, job_row
from app.settings import Settings


def _refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def _new(n: int, now_ms: int) -> NewJob:
    return NewJob(
        name=f"nightly-{n % 50}", queue="root.deadline", deadline_ms=now_ms + 86_400_000,
        requested_tasks=4, input_bytes=None, block_size=None, run=RUN, tags=(),
        idempotency_key=None, request_hash=f"fill-{n}", owner="bench",
    )  # fmt: skip


def _fill(url: str, waiting: int, now_ms: int) -> list[str]:
    engine = make_engine(url)
    try:
        with transaction(make_session_factory(engine)) as session:
            rows = [job_row(_new(n, now_ms), now_ms - 1000) for n in range(waiting)]
            session.add_all(rows)
        return [row.id for row in rows]
    finally:
        engine.dispose()


async def measure(url: str, policy: str, waiting: int, reads: int) -> tuple[float, float, float]:
    """CPU and wall milliseconds per ``GET /jobs/{id}`` of a queued job, CPU per ``GET
    /estimator``."""
    upgrade(url)
    ids = _fill(url, waiting, int(time.time() * 1000))[: reads + 1]
    settings = Settings(
        database_url=url,
        cluster_name="bench",
        deadline_capacity_vcores=64,
        admission_policy=policy,
        auth="none",
        allowed_hosts=("*",),
        log_level="ERROR",  # not the warning that authentication is off, once per cell
    )
    app = create_app(settings, run_loops=False, rm_transport=httpx.MockTransport(_refuse))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            first = await client.get(f"/jobs/{ids[0]}")
            first.raise_for_status()
            c0, w0 = time.process_time(), time.perf_counter()
            for job_id in ids[1:]:
                (await client.get(f"/jobs/{job_id}")).raise_for_status()
            n = len(ids) - 1
            cpu, wall = (time.process_time() - c0) * 1000 / n, (time.perf_counter() - w0) * 1000 / n
            c0 = time.process_time()
            for _ in range(reads):
                (await client.get("/estimator")).raise_for_status()
            return cpu, wall, (time.process_time() - c0) * 1000 / reads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waiting", default="100,1000,10000", help="comma-separated sizes")
    parser.add_argument("--policies", default="justice,promise", help="comma-separated")
    parser.add_argument("--reads", type=int, default=20, help="timed reads per cell")
    parser.add_argument("--database-url", help="PostgreSQL admin URL (default: temp SQLite)")
    args = parser.parse_args()
    engine_name = "postgresql" if args.database_url else "sqlite"
    print(
        f"{'db':<11}{'policy':<9}{'waiting':>8}{'job CPU ms':>12}{'job wall ms':>13}"
        f"{'estimator CPU ms':>18}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for policy in args.policies.split(","):
            for size in (int(x) for x in args.waiting.split(",")):
                with database(args.database_url, tmp, f"reads{policy}{size}") as url:
                    cpu, wall, est = asyncio.run(measure(url, policy, size, args.reads))
                print(f"{engine_name:<11}{policy:<9}{size:>8}{cpu:>12.1f}{wall:>13.1f}{est:>18.1f}")


if __name__ == "__main__":
    main()
