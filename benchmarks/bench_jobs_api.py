"""Latency of ``POST /jobs`` and ``GET /jobs/{id}`` at a steady request rate.

Starts the real server (``yarn-sidecar serve``: migrations, uvicorn, poller and admission loops)
on 127.0.0.1 with a fresh SQLite file, or the empty database given with ``--database-url``
(PostgreSQL recommended), and an RM address that refuses connections, so what is measured is the
sidecar: validation, the committed admission transaction (Justice, seed 004 Algorithm 6) and the
read path. Requests are sent open-loop at ``--rate`` per second (a request is not held back by
slow earlier ones), bounded by ``--count`` and ``--max-duration``; every tenth POST is a retry of
an earlier one with the same ``Idempotency-Key``. Prints p50/p95/p99/max per endpoint; a 503
with ``Retry-After`` (load shed, nothing stored) is counted apart from errors.

``--waiting 100,1000,10000`` first stores that many queued jobs (deadlines a day away, more
tasks than the deadline capacity can ever grant at once, so they stay waiting) and prints one
table row per size, each against a fresh database: what a submission costs as the queue grows.
A 503 (admission saturated, with ``Retry-After``) counts as an error.

Run: ``.venv/bin/python benchmarks/bench_jobs_api.py [--rate 50] [--count 1000]
[--max-duration 60] [--database-url postgresql://...] [--waiting 100,1000,10000]``
(with ``--waiting`` and PostgreSQL give an admin URL, e.g. ``$YARN_SIDECAR_TEST_PG_URL``: a
database is created and dropped per size).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

RUN = {"kind": "application", "command": "sleep 30"}


@dataclass
class Series:
    """Latencies (ms) and failures of one endpoint."""

    latencies_ms: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    shed: int = 0  # 503 + Retry-After: refused whole, not an error

    def fail(self, what: str) -> None:
        self.failures[what] = self.failures.get(what, 0) + 1


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def server(database_url: str, port: int, log: Path | None = None) -> Iterator[str]:
    """``yarn-sidecar serve`` in a child process until the block ends."""
    env = {
        **os.environ,
        "YARN_SIDECAR_DATABASE_URL": database_url,
        "YARN_SIDECAR_RM_URLS": f"http://127.0.0.1:{_free_port()}",
        "YARN_SIDECAR_DEADLINE_CAPACITY_VCORES": "64",
        "YARN_SIDECAR_CLUSTER_NAME": "bench",
        "YARN_SIDECAR_LOG_LEVEL": "ERROR",
        "YARN_SIDECAR_RM_RETRIES": "0",
        # bound to loopback, so authentication may be off: this measures admission, not tokens
        "YARN_SIDECAR_AUTH": "none",
    }
    cli = Path(sys.executable).parent / "yarn-sidecar"
    sink = log.open("wb") if log else subprocess.DEVNULL
    proc = subprocess.Popen(
        [str(cli), "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=sink,
        stderr=sink,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_up(base, proc)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        if log:
            sink.close()  # type: ignore[union-attr]


def _wait_up(base: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("server did not answer /health within 60 s")


def _payload(n: int) -> dict[str, object]:
    return {"name": f"bench-{n}", "deadline": 3600, "requested_tasks": 1 + n % 8, "run": RUN}


async def _post(client: httpx.AsyncClient, i: int, series: Series, ids: list[str]) -> None:
    # Every tenth request retries an earlier one: same key, same body (answered 200).
    n = i // 10 * 10 if i % 10 == 9 else i
    payload, key = _payload(n), f"bench-{n}"
    started = time.perf_counter()
    try:
        r = await client.post("/jobs", json=payload, headers={"Idempotency-Key": key})
    except httpx.HTTPError as exc:
        series.fail(type(exc).__name__)
        return
    series.latencies_ms.append((time.perf_counter() - started) * 1000)
    if r.status_code == 503 and "Retry-After" in r.headers:
        series.shed += 1
    elif r.status_code not in (200, 202):
        series.fail(f"HTTP {r.status_code}")
    else:
        ids.append(r.json()["id"])


async def _get(client: httpx.AsyncClient, job_id: str, series: Series) -> None:
    started = time.perf_counter()
    try:
        r = await client.get(f"/jobs/{job_id}")
    except httpx.HTTPError as exc:
        series.fail(type(exc).__name__)
        return
    series.latencies_ms.append((time.perf_counter() - started) * 1000)
    if r.status_code != 200:
        series.fail(f"HTTP {r.status_code}")


async def run(base: str, rate: float, count: int, max_duration: float) -> dict[str, Series]:
    """Open-loop load: request ``i`` leaves at ``i / rate`` s; POSTs and GETs alternate 3:1."""
    posts, gets = Series(), Series()
    ids: list[str] = []
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
        start = time.perf_counter()
        tasks: list[asyncio.Task[None]] = []
        for i in range(count):
            at = start + i / rate
            if at - start > max_duration:
                break
            await asyncio.sleep(max(0.0, at - time.perf_counter()))
            if i % 4 == 3 and ids:
                tasks.append(asyncio.create_task(_get(client, ids[i % len(ids)], gets)))
            else:
                tasks.append(asyncio.create_task(_post(client, i, posts, ids)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
    print(f"sent {len(tasks)} requests in {elapsed:.1f} s ({len(tasks) / elapsed:.1f}/s)")
    return {"POST /jobs": posts, "GET /jobs/{id}": gets}


def _pct(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def table(results: dict[str, Series]) -> str:
    """Percentiles per endpoint, milliseconds."""
    lines = [
        f"{'endpoint':<16}{'n':>6}{'errors':>8}{'503':>6}{'p50 ms':>10}{'p95 ms':>10}"
        f"{'p99 ms':>10}{'max ms':>10}"
    ]
    for name, s in results.items():
        lat = sorted(s.latencies_ms)
        errors = sum(s.failures.values())
        if not lat:
            lines.append(f"{name:<16}{0:>6}{errors:>8}{s.shed:>6}")
            continue
        lines.append(
            f"{name:<16}{len(lat):>6}{errors:>8}{s.shed:>6}{_pct(lat, 50):>10.1f}"
            f"{_pct(lat, 95):>10.1f}{_pct(lat, 99):>10.1f}{lat[-1]:>10.1f}"
        )
        if s.failures:
            lines.append(f"{'':<16}failures: {s.failures}")
    return "\n".join(lines)


def prefill(database_url: str, waiting: int) -> None:
    """Migrate and store ``waiting`` queued jobs, as accepted submissions would have."""
    from app.db.migrate import upgrade
    from app.db.session import make_engine, make_session_factory, transaction
    from app.services.admission import NewJob, job_row

    upgrade(database_url)
    engine = make_engine(database_url)
    now_ms = int(time.time() * 1000)
    try:
        with transaction(make_session_factory(engine)) as session:
            for n in range(waiting):
                new = NewJob(
                    name=f"waiting-{n}",
                    queue="default",
                    deadline_ms=now_ms + 86_400_000,
                    requested_tasks=10_000,
                    input_bytes=None,
                    block_size=None,
                    run=RUN,
                    tags=(),
                    idempotency_key=None,
                    request_hash=f"prefill-{n}",
                )
                session.add(job_row(new, now_ms))
    finally:
        engine.dispose()


@contextmanager
def database(url: str | None, tmp: str, tag: str) -> Iterator[str]:
    """A fresh database: a SQLite file, or a PostgreSQL database made from an admin URL."""
    if not url or url.startswith("sqlite"):
        yield url or f"sqlite:///{tmp}/bench-{tag}.db"
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"sidecar_bench_{tag}_{os.getpid()}"
    admin = create_engine(
        make_url(url).set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=50.0, help="requests per second")
    parser.add_argument("--count", type=int, default=1000, help="requests in total (bound)")
    parser.add_argument("--max-duration", type=float, default=60.0, help="seconds (bound)")
    parser.add_argument("--database-url", help="an empty database (default: temp SQLite)")
    parser.add_argument("--server-log", type=Path, help="write the server's log here")
    parser.add_argument("--waiting", help="comma-separated queue sizes, e.g. 100,1000,10000")
    args = parser.parse_args()
    if args.rate <= 0 or args.count < 1 or args.max_duration <= 0:
        parser.error("--rate, --count and --max-duration must be positive")
    if args.waiting:
        sizes = [int(x) for x in args.waiting.split(",")]
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for waiting in sizes:
                with database(args.database_url, tmp, str(waiting)) as url:
                    prefill(url, waiting)
                    print(f"{url.split('://', 1)[0]}: {waiting} waiting; rate {args.rate:g}/s")
                    with server(url, _free_port(), args.server_log) as base:
                        results = asyncio.run(
                            run(base, args.rate, args.count, args.max_duration)
                        )
                rows.append((waiting, results))
        print(f"{'waiting':>8} " + table(rows[0][1]).splitlines()[0])
        for waiting, results in rows:
            for line in table(results).splitlines()[1:]:
                print(f"{waiting:>8} {line}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{tmp}/bench.db"
        engine = url.split("://", 1)[0]
        print(f"database: {engine}; rate {args.rate:g}/s; at most {args.count} requests")
        with server(url, _free_port(), args.server_log) as base:
            results = asyncio.run(run(base, args.rate, args.count, args.max_duration))
    print(table(results))


if __name__ == "__main__":
    main()
