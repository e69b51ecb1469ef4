"""Simulator throughput and memory: simulated jobs per second, wall time, peak RSS.

    .venv/bin/python benchmarks/bench_sim.py                  # synthetic + full 29-day trace
    .venv/bin/python benchmarks/bench_sim.py --limit 100000   # a slice of the 29-day trace
    .venv/bin/python benchmarks/bench_sim.py --skip-29d       # synthetic only (about a minute)
    .venv/bin/python benchmarks/bench_sim.py --skip-29d --policies baseline-fs,ltrf

Each run happens in a forked child so that its peak resident memory (``ru_maxrss``) is its own;
the jobs are loaded once in the parent before forking (load time is reported separately). The
29-day Google trace runs under Justice (one queue, ``Fixed2x`` deadlines) and under LTRF (users
folded into 4 queues), at ``--capacity`` percent of the trace's peak parallelism.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from app.sim import experiment, trace
from app.sim.cluster import ClusterSpec
from app.sim.jobs import SimJob

# shared/ sits beside the repository, as in CI.
TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
TRACE_29D = TRACES / "google2011" / "jobs_29d.csv.gz"


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the result table."""

    workload: str
    policy: str
    model: str
    jobs: int
    capacity: int
    wall_s: float
    events: int
    peak_rss_mb: float

    @property
    def jobs_per_s(self) -> float:
        """Simulated jobs per wall-clock second."""
        return self.jobs / self.wall_s if self.wall_s > 0 else float("inf")


def _child(
    conn: Connection,
    policy: str,
    jobs: Sequence[SimJob],
    capacity: int,
    label: str,
    model: str,
) -> None:
    t0 = time.perf_counter()
    result = experiment.run_policy(policy, jobs, ClusterSpec(capacity), model=model)
    wall = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    conn.send(Row(label, policy, model, len(jobs), capacity, wall, result.events, rss_mb))
    conn.close()


def run_forked(
    policy: str, jobs: Sequence[SimJob], capacity: int, label: str, model: str = "fluid"
) -> Row:
    """Simulate in a forked child and return its measurements."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, policy, jobs, capacity, label, model))
    proc.start()
    child.close()
    row: Row = parent.recv()
    proc.join()
    return row


def _print(rows: Sequence[Row]) -> None:
    head = f"{'workload':<22}{'policy':<14}{'model':<7}{'jobs':>9}{'vcores':>9}{'wall s':>9}"
    print(head + f"{'jobs/s':>10}{'events':>10}{'peak MB':>9}")
    for r in rows:
        print(
            f"{r.workload:<22}{r.policy:<14}{r.model:<7}{r.jobs:>9}{r.capacity:>9}{r.wall_s:>9.1f}"
            f"{r.jobs_per_s:>10.0f}{r.events:>10}{r.peak_rss_mb:>9.0f}"
        )
    sys.stdout.flush()


SYNTHETIC_POLICIES = (
    "baseline-fs",
    "reactive-fs",
    "oracle",
    "pythia",
    "justice",
    "promise",
    "fawkes:TD",
    "ltrf",
)


def synthetic_rows(
    n: int, models: Sequence[str] = ("fluid",), policies: Sequence[str] = SYNTHETIC_POLICIES
) -> list[Row]:
    """Throughput on a seeded synthetic workload for each policy, in each cluster model."""
    jobs = trace.synthetic(trace.SyntheticSpec(jobs=n, mean_interarrival_s=5.0), 1)
    cap = 400
    jobs = experiment.with_deadlines(jobs, "Fixed2x", cap, 1)
    label = f"synthetic {n}"
    return [run_forked(p, jobs, cap, label, m) for m in models for p in policies]


def google29d_rows(limit: int | None, capacity_pct: float) -> list[Row]:
    """The 29-day trace (or its first ``limit`` jobs) under Justice and LTRF."""
    t0 = time.perf_counter()

    def rows_read(n: int) -> None:
        print(f"\r  read {n} rows", end="", file=sys.stderr, flush=True)

    grouped = trace.load_google29d(TRACE_29D, "group:4", rows_read, limit)
    print(file=sys.stderr)
    load_s = time.perf_counter() - t0
    peak = trace.peak_parallelism(grouped)
    cap = max(1, int(peak * capacity_pct / 100))
    print(f"loaded {len(grouped)} jobs in {load_s:.1f} s; peak parallelism {peak}, using {cap}")
    single = [SimJob(j.job_id, j.submit_s, j.tasks, j.work, runtime_s=j.runtime_s) for j in grouped]
    single = experiment.with_deadlines(single, "Fixed2x", cap, 1)
    label = "google 29d" + (f" first {limit}" if limit else "")
    return [run_forked("justice", single, cap, label), run_forked("ltrf", grouped, cap, label)]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse options, run, print one table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--synthetic", type=int, default=20000, help="synthetic jobs (0: skip)")
    p.add_argument("--limit", type=int, help="only the first N jobs of the 29-day trace")
    # The 29-day trace's mean demand (1,171 vcores) is 63% of its peak parallelism (1,873, set by
    # the long jobs already running at t = 0): below that the queue grows for 29 days.
    p.add_argument("--capacity", type=float, default=100.0, help="percent of the 29d peak")
    p.add_argument("--skip-29d", action="store_true")
    p.add_argument(
        "--models", default="fluid,tasks", help="cluster models of the synthetic runs (comma list)"
    )
    p.add_argument(
        "--policies",
        default=",".join(SYNTHETIC_POLICIES),
        help="policies of the synthetic runs (comma list)",
    )
    args = p.parse_args(argv)
    rows: list[Row] = []
    if args.synthetic:
        rows += synthetic_rows(args.synthetic, args.models.split(","), args.policies.split(","))
        _print(rows)
    if not args.skip_29d:
        rows += google29d_rows(args.limit, args.capacity)
        print()
        _print(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
