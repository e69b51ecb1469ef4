"""Latency of ``POST /jobs`` and ``GET /jobs/{id}`` at a steady request rate.

Starts the real server (``yarn-sidecar serve``: migrations, uvicorn, poller and admission loops)
on 127.0.0.1 with a fresh SQLite file, or the empty database given with ``--database-url``
(PostgreSQL recommended), and an RM address that refuses connections, so what is measured is the
sidecar: validation, the committed admission transaction (Justice, seed 004 Algorithm 6) and the
read path. Requests are sent open-loop at ``--rate`` per second (a request is not held back by
slow earlier ones), bounded by ``--count`` and ``--max-duration``; every tenth POST is a retry of
an earlier one with the same ``Idempotency-Key``. Prints p50/p95/p99/max per endpoint; a 503
with ``Retry-After`` (load shed, nothing stored) is counted apart from errors. Also prints the
CPU each request cost the server and the load generator: both share the machine's cores. The
default generator is a minimal keep-alive HTTP/1.1 client (about 0.4 ms of CPU a request here);
``--client httpx`` sends the same requests through httpx (4 to 6 ms a request here, more than
the server's own cost, so at 200/s it starves the server it measures).

``--waiting 100,1000,10000`` first stores that many queued jobs (deadlines a day away, more
tasks than the deadline capacity can ever grant at once, so they stay waiting) and prints one
table row per size, each against a fresh database: what a submission costs as the queue grows.
A 503 (admission saturated, with ``Retry-After``) counts as an error.

Run: ``.venv/bin/python benchmarks/bench_jobs_api.py [--rate 50] [--count 1000]
[--max-duration 60] [--database-url postgresql://...] [--waiting 100,1000,10000]
[--client raw|httpx]``
(with ``--waiting`` and PostgreSQL give an admin URL, e.g. ``$YARN_SIDECAR_TEST_PG_URL``: a
database is created and dropped per size).
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
def server(
    database_url: str, port: int, log: Path | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
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
        yield base, proc
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


class RawClient:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams: what the server is sent and
    answers is the same as with httpx, at a small fraction of its CPU, so on a small machine the
    load generator does not take the cores the server is measured on (``--client httpx`` keeps
    the general-purpose client for comparison)."""

    def __init__(self, base: str, max_connections: int = 200) -> None:
        host, _, port = base.removeprefix("http://").partition(":")
        self.host, self.port = host, int(port)
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.slots = asyncio.Semaphore(max_connections)

    async def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n"
        for name, value in (headers or {}).items():
            head += f"{name}: {value}\r\n"
        if body:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        data = head.encode() + b"\r\n" + body
        async with self.slots:
            conn = self.idle.pop() if self.idle else None
            if conn is None:
                conn = await asyncio.open_connection(self.host, self.port)
            reader, writer = conn
            try:
                writer.write(data)
                lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                status = int(lines[0].split(" ", 2)[1])
                answer = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        answer[name.strip().lower()] = value.strip()
                content = await reader.readexactly(int(answer.get("content-length", "0")))
            except BaseException:
                writer.close()
                raise
            if answer.get("connection", "").lower() == "close":
                writer.close()
            else:
                self.idle.append(conn)
        return status, answer, content

    async def aclose(self) -> None:
        for _, writer in self.idle:
            writer.close()


class HttpxClient:
    """The same requests through ``httpx.AsyncClient``."""

    def __init__(self, base: str) -> None:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
        self.client = httpx.AsyncClient(base_url=base, timeout=60, limits=limits)

    async def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        if body:
            headers = {**(headers or {}), "Content-Type": "application/json"}
        r = await self.client.request(method, path, content=body or None, headers=headers)
        return r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.content

    async def aclose(self) -> None:
        await self.client.aclose()


Client = RawClient | HttpxClient
FAILURES = (httpx.HTTPError, OSError, asyncio.IncompleteReadError, ValueError)


async def _post(client: Client, i: int, series: Series, ids: list[str]) -> None:
    # Every tenth request retries an earlier one: same key, same body (answered 200).
    n = i // 10 * 10 if i % 10 == 9 else i
    body, key = json.dumps(_payload(n)).encode(), f"bench-{n}"
    started = time.perf_counter()
    try:
        status, headers, content = await client.request(
            "POST", "/jobs", body, {"Idempotency-Key": key}
        )
    except FAILURES as exc:
        series.fail(type(exc).__name__)
        return
    series.latencies_ms.append((time.perf_counter() - started) * 1000)
    if status == 503 and "retry-after" in headers:
        series.shed += 1
    elif status not in (200, 202):
        series.fail(f"HTTP {status}")
    else:
        ids.append(json.loads(content)["id"])


async def _get(client: Client, job_id: str, series: Series) -> None:
    started = time.perf_counter()
    try:
        status, _, _ = await client.request("GET", f"/jobs/{job_id}")
    except FAILURES as exc:
        series.fail(type(exc).__name__)
        return
    series.latencies_ms.append((time.perf_counter() - started) * 1000)
    if status != 200:
        series.fail(f"HTTP {status}")


async def run(
    base: str, rate: float, count: int, max_duration: float, client_kind: str = "raw"
) -> dict[str, Series]:
    """Open-loop load: request ``i`` leaves at ``i / rate`` s; POSTs and GETs alternate 3:1."""
    posts, gets = Series(), Series()
    ids: list[str] = []
    client: Client = RawClient(base) if client_kind == "raw" else HttpxClient(base)
    try:
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
    finally:
        await client.aclose()
    print(f"sent {len(tasks)} requests in {elapsed:.1f} s ({len(tasks) / elapsed:.1f}/s)")
    return {"POST /jobs": posts, "GET /jobs/{id}": gets}


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (Linux ``/proc``; ``None`` elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured_run(
    base: str, proc: subprocess.Popen[bytes], args: argparse.Namespace
) -> dict[str, Series]:
    """``run`` with the CPU it cost the server and this load generator, per request, printed:
    on a small machine the two share the cores, so the generator's share is stated."""
    server_before, client_before = _cpu_s(proc.pid), time.process_time()
    results = asyncio.run(run(base, args.rate, args.count, args.max_duration, args.client))
    server_after, client_after = _cpu_s(proc.pid), time.process_time()
    n = sum(len(s.latencies_ms) + sum(s.failures.values()) for s in results.values()) or 1
    server_ms = (
        "n/a"
        if server_before is None or server_after is None
        else f"{(server_after - server_before) * 1000 / n:.2f} ms"
    )
    client_ms = (client_after - client_before) * 1000 / n
    print(f"CPU per request: server {server_ms}, load generator ({args.client}) {client_ms:.2f} ms")
    return results


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
    parser.add_argument(
        "--client",
        choices=("raw", "httpx"),
        default="raw",
        help="load generator: a minimal keep-alive HTTP/1.1 client (default) or httpx",
    )
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
                    with server(url, _free_port(), args.server_log) as (base, proc):
                        results = measured_run(base, proc, args)
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
        with server(url, _free_port(), args.server_log) as (base, proc):
            results = measured_run(base, proc, args)
    print(table(results))


if __name__ == "__main__":
    main()
