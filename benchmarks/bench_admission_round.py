"""What one admission round costs as the queue grows: the time the admission lock is held and the
round's wall time, for the full round and for the service tick that ranks outside the lock.

The rounds are the service's own (``app.jobs.rounds.admission_round``, ``app.jobs.tick_round``)
on a real database (a temp SQLite file, or a PostgreSQL database made from ``--database-url``
and dropped after). Per size the database holds that many queued jobs (64 tasks each, deadlines
a day away: they stay queued) and the deadline capacity (8 vcores) is held by one admitted job, as
on a busy deadline queue. A full round runs inside one transaction, which is what the service
holds the admission lock for; a tick reads and ranks without the lock and holds it only for its
apply transaction. ``--every`` reads every waiting job in both, as before
``AdmissionPolicy.waiting_filter``, for a side-by-side comparison in one run.

Run: ``.venv/bin/python benchmarks/bench_admission_round.py [--waiting 1000,10000]
[--rounds 10] [--database-url postgresql://...] [--every]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_jobs_api import RUN, database

from app.db.migrate import upgrade
from app.db.session import make_engine, make_session_factory, transaction
from app.jobs import tick_round
from app.jobs.rounds import AdmissionConfig, RoundMark, admission_round
from app.policies.justice import core
from app.policies.justice.admission import JusticeAdmission
from app.services.admission import NewJob, job_row

CAPACITY = 8
T0 = 1_700_000_000_000


def _fill(sessions: sessionmaker[Session], waiting: int) -> None:
    def new(n: int, tasks: int) -> NewJob:
        return NewJob(
            name=f"waiting-{n}", queue="root.deadline", deadline_ms=T0 + 86_400_000,
            requested_tasks=tasks, input_bytes=None, block_size=None, run=RUN, tags=(),
            idempotency_key=None, request_hash=f"fill-{n}",
        )  # fmt: skip

    with transaction(sessions) as session:
        session.add(job_row(new(-1, CAPACITY), T0 - 1000))  # admitted first: holds the CPUs
    cfg = _cfg()
    with transaction(sessions) as session:
        admission_round(session, cfg, T0 - 1000, "tick")
    with transaction(sessions) as session:
        session.add_all([job_row(new(n, 64), T0 - 500) for n in range(waiting)])


def _cfg() -> AdmissionConfig:
    return AdmissionConfig(
        core.make_params("justice", {"drop_threshold": 10_000}), CAPACITY, "bench", "enforce"
    )


def measure(url: str, waiting: int, rounds: int) -> dict[str, tuple[list[float], list[float]]]:
    """Per kind, the lock-held and wall milliseconds of ``rounds`` rounds."""
    upgrade(url)
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    cfg = _cfg()
    out: dict[str, tuple[list[float], list[float]]] = {}
    try:
        _fill(sessions, waiting)
        with transaction(sessions) as session:
            mark: RoundMark | None = admission_round(session, cfg, T0, "tick").mark
        held: list[float] = []
        wall: list[float] = []
        for i in range(rounds):
            now = T0 + 1000 * (i + 1)
            started = time.perf_counter()
            with transaction(sessions) as session:
                mark = admission_round(session, cfg, now, "completion").mark
            held.append((time.perf_counter() - started) * 1000)
            wall.append(held[-1])
        out["full round"] = (held, wall)
        held, wall = [], []
        for i in range(rounds):
            now = T0 + 1000 * (rounds + i + 1)
            started = time.perf_counter()
            with sessions() as session:
                taken = tick_round.snapshot(session, cfg, now, mark)
            assert taken is not None, "the tick fell back to the full round"
            locked = time.perf_counter()
            with transaction(sessions) as session:
                result = tick_round.apply(session, cfg, now, "tick", taken, mark)
            assert result is not None
            mark = result.mark
            done = time.perf_counter()
            held.append((done - locked) * 1000)
            wall.append((done - started) * 1000)
        out["tick"] = (held, wall)
    finally:
        engine.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waiting", default="1000,10000", help="comma-separated queue sizes")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--database-url", help="PostgreSQL admin URL (default: temp SQLite)")
    parser.add_argument("--every", action="store_true", help="also read every waiting job")
    args = parser.parse_args()
    engine_name = "postgresql" if args.database_url else "sqlite"
    modes = [("selected", False)] + ([("every job", True)] if args.every else [])
    print(
        f"{'db':<11}{'waiting':>8}  {'reads':<10}{'round':<12}{'lock p50 ms':>12}"
        f"{'lock max ms':>12}{'wall p50 ms':>12}"
    )
    real_filter = JusticeAdmission.waiting_filter
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(x) for x in args.waiting.split(",")):
            for label, every in modes:
                if every:
                    JusticeAdmission.waiting_filter = lambda self, est, free: None  # type: ignore[method-assign,assignment,return-value]
                try:
                    with database(args.database_url, tmp, f"round{size}{int(every)}") as url:
                        results = measure(url, size, args.rounds)
                finally:
                    JusticeAdmission.waiting_filter = real_filter  # type: ignore[method-assign]
                for kind, (held, wall) in results.items():
                    print(
                        f"{engine_name:<11}{size:>8}  {label:<10}{kind:<12}"
                        f"{statistics.median(held):>12.1f}{max(held):>12.1f}"
                        f"{statistics.median(wall):>12.1f}"
                    )


if __name__ == "__main__":
    main()
