"""Latency of the dashboard's reads and ``/metrics`` at the scale the operator's view must stay
usable at: 200 leaf queues sampled every minute, a controller decision per interval over all of
them, and 10,000 deadline jobs (each with a decision).

Seeds a fresh SQLite file (or the empty database given with ``--database-url``) through the repo
functions the loops use, then calls each endpoint ``--repeat`` times in-process (httpx over ASGI,
lifespan included, no loops) and prints p50 / p95 / max in ms and the response size.

Run: ``.venv/bin/python benchmarks/bench_dashboard.py [--hours 6] [--queues 200] [--jobs 10000]
[--repeat 20] [--database-url postgresql://...]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from app.auth.principal import Role
from app.db import auth_repo, repo
from app.db.jobs_models import Job, JobDecision
from app.db.migrate import upgrade
from app.db.models import Decision, PollRecord
from app.db.session import make_engine, make_session_factory, transaction
from app.domain.model import NodeState, QueueState, Resources
from app.main import create_app
from app.settings import Settings

CLUSTER = "bench"
STEP_MS = 60_000


def _queue(path: str, capacity: float, used: int, leaf: bool = True) -> QueueState:
    return QueueState(
        path=path,
        name=path.rsplit(".", 1)[-1],
        parent="root" if leaf else None,
        is_leaf=leaf,
        state="RUNNING",
        capacity=capacity,
        max_capacity=100.0,
        used_capacity=0.0,
        absolute_capacity=capacity,
        absolute_max_capacity=100.0,
        absolute_used_capacity=0.0,
        used=Resources(used, used * 1024),
        pending=Resources(0, 0),
        num_applications=0,
        num_active_apps=0,
        num_pending_apps=0,
        pending_containers=used % 7,
        allocated_containers=used,
    )


def seed(url: str, hours: int, queues: int, jobs: int, end_ms: int) -> None:
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    names = [f"root.q{i:03d}" for i in range(queues)]
    node = NodeState("n:1", "n", "/r", "RUNNING", (), Resources(800, 819200), Resources(0, 0), 0)
    start = end_ms - hours * 3_600_000
    for k, ms in enumerate(range(start, end_ms + 1, STEP_MS)):
        qs = [_queue("root", 100.0, 0, leaf=False)]
        qs += [_queue(n, 100.0 / queues, (k + i) % 9) for i, n in enumerate(names)]
        with transaction(sessions) as s:
            cluster = repo.ensure_cluster(s, CLUSTER, ["http://rm:8088"], ms)
            ids = repo.upsert_queues(s, cluster.id, qs, ms)
            repo.add_queue_samples(s, ids, qs, ms)
            repo.add_node_samples(s, cluster.id, [node], ms)
            repo.record_poll(
                s, PollRecord(cluster_id=cluster.id, started_ms=ms, duration_ms=50, ok=True)
            )
            cluster.last_good_poll_ms = ms
            plan = {
                n: {"target_h": 50 + (k + i) % 100, "share": 0.005} for i, n in enumerate(names)
            }
            s.add(
                Decision(
                    cluster_id=cluster.id,
                    created_ms=ms,
                    kind="queue",
                    policy="fawkes:TD",
                    mode="advise",
                    params={},
                    inputs={
                        "policy_inputs": {"queues": {n: {"used_fraction": 0.01} for n in names}}
                    },
                    outputs={
                        "plan": {"push": False, "reason": "bench", "queues": plan},
                        "policy": {"details": {"weights": {n: 1.0 for n in names}}},
                    },
                    pushed=None,
                    status="advised",
                    reason="bench",
                )
            )
    with transaction(sessions) as s:
        for i in range(jobs):
            submitted = start + i * 1000
            s.add(
                Job(
                    id=f"{i:032x}",
                    name=f"job-{i}",
                    queue=names[i % queues],
                    state=("finished", "queued", "submitted", "dropped")[i % 4],
                    requested_tasks=4,
                    deadline_s=600.0,
                    deadline_ms=submitted + 600_000,
                    submitted_ms=submitted,
                    run={},
                    tags=[],
                    request_hash="0" * 64,
                    met_deadline=(i % 3 != 0) if i % 4 == 0 else None,
                    reason="",
                    updated_ms=submitted,
                )
            )
        s.flush()
        for i in range(jobs):
            s.add(
                JobDecision(
                    job_id=f"{i:032x}",
                    created_ms=start + i * 1000,
                    action="admit",
                    cpus=2,
                    reason=f"whole request of {i % 5} CPUs fits",
                    numbers={},
                )
            )
    engine.dispose()


async def measure(
    url: str, end_ms: int, repeat: int, queues: int
) -> list[tuple[str, list[float], int]]:
    api = create_app(Settings(database_url=url, cluster_name=CLUSTER), run_loops=False)
    # the dashboard's reads as a viewer makes them: each one checks its bearer token
    with transaction(make_session_factory(make_engine(url))) as s:
        _, token = auth_repo.create_token(
            s, name="bench-viewer", role=Role.VIEWER, user=None, now_ms=end_ms
        )
    middle = f"root.q{queues // 2:03d}"
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(end_ms / 1000 - 6 * 3600))
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(end_ms / 1000 + 1))
    paths = [
        ("/overview", "/overview"),
        ("/queues/series (6 h)", f"/queues/series?path={middle}&since={since}&until={until}"),
        ("/jobs?limit=50", "/jobs?limit=50"),
        ("/jobs?state=finished&limit=50", "/jobs?state=finished&limit=50"),
        ("/decisions?limit=50", "/decisions?limit=50"),
        ("/metrics", "/metrics"),
        ("/ui", "/ui"),
    ]
    out = []
    async with api.router.lifespan_context(api):
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://localhost",
            headers={"Authorization": f"Bearer {token}"},
        ) as client:
            for label, path in paths:
                times, size = [], 0
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    r = await client.get(path)
                    times.append((time.perf_counter() - t0) * 1000)
                    r.raise_for_status()
                    size = len(r.content)
                out.append((label, times, size))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=int, default=6)
    parser.add_argument("--queues", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--database-url", help="an empty database (default: a temp SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'bench.db'}"
        upgrade(url)
        end_ms = int(time.time() * 1000) // STEP_MS * STEP_MS
        t0 = time.perf_counter()
        seed(url, args.hours, args.queues, args.jobs, end_ms)
        print(
            f"seeded {args.queues} queues x {args.hours * 60 + 1} polls, {args.jobs} jobs "
            f"in {time.perf_counter() - t0:.1f} s"
        )
        rows = asyncio.run(measure(url, end_ms, args.repeat, args.queues))
    print(f"{'endpoint':<32} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'bytes':>9}")
    for label, times, size in rows:
        ordered = sorted(times)
        p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
        print(f"{label:<32} {statistics.median(times):8.1f} {p95:8.1f} {max(times):8.1f} {size:9d}")


if __name__ == "__main__":
    main()
