"""One experiment = a workload, a cluster size, deadlines and one or more policies on the same
input (thesis seed 004, section 5.2: every allocator replays the same trace and deadlines).

Also the static-partitioning reference of LTRF's Figure 9.1 (seed 002, section 9.4.4): each queue
replays its own jobs alone on ``share x capacity`` vcores under fair share.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.sim import deadlines, recurring, registry, trace
from app.sim.allocators import BaselineFS
from app.sim.cluster import ClusterSpec
from app.sim.jobs import MAX_RUN_S, Decided, SimJob, years
from app.sim.queue_policies import PlanSettings
from app.sim.runner import Progress, SimResult, Simulation


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """Where the jobs come from."""

    traces: tuple[str, ...]  # paths, or ("synthetic",)
    fmt: str | None = None
    queue_by: str = "single"
    limit_jobs: int | None = None
    seed: int = 0
    synthetic_jobs: int = 500
    swim: trace.SwimParams = field(default_factory=trace.SwimParams)


def load_workload(spec: WorkloadSpec, rows: trace.RowProgress | None = None) -> list[SimJob]:
    """Jobs of ``spec``, the first ``limit_jobs`` by submission time when limited."""
    if spec.limit_jobs is not None and spec.limit_jobs < 1:
        raise ValueError(f"limit_jobs must be >= 1, got {spec.limit_jobs}")
    if spec.traces == ("synthetic",):
        jobs = trace.synthetic(trace.SyntheticSpec(jobs=spec.synthetic_jobs), spec.seed)
    elif spec.traces == ("recurring",):
        jobs = recurring.recurring(recurring.RecurringSpec(jobs=spec.synthetic_jobs), spec.seed)
    else:
        jobs = []
        for raw in spec.traces:
            jobs.extend(_load_one(Path(raw), spec, rows))
    jobs.sort(key=lambda j: (j.submit_s, j.job_id))
    return jobs[: spec.limit_jobs] if spec.limit_jobs is not None else jobs


def _load_one(path: Path, spec: WorkloadSpec, rows: trace.RowProgress | None) -> list[SimJob]:
    fmt = spec.fmt or infer_format(path)
    if fmt == "swim":
        return trace.load_swim(path, params=spec.swim)
    if fmt == "google":
        return trace.load_google(path, spec.queue_by)
    if fmt == "google29d":
        return trace.load_google29d(path, spec.queue_by, rows, spec.limit_jobs)
    if fmt == "csv":
        return trace.load_csv(path)
    raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(trace.FORMATS)}")


def infer_format(path: Path) -> str:
    """Guess the format from the file name (``--format`` overrides)."""
    name = path.name
    if name.endswith(".tsv"):
        return "swim"
    if "29d" in name:
        return "google29d"
    if "first19h" in name:
        return "google"
    return "csv"


# A cluster larger than any YARN cluster runs (a few 10,000 nodes): a capacity beyond it is a
# typo, and the simulator's arrays and sums are sized for sane numbers.
MAX_VCORES = 10_000_000


def resolve_capacity(text: str, jobs: Sequence[SimJob]) -> int:
    """``"450"`` vcores, ``"25%"`` of the trace's peak parallelism (thesis Table 5.1), or
    ``"2x-mean"``: a multiple of the trace's mean demand (``trace.mean_demand``); at most
    ``MAX_VCORES``. Every error message starts with ``capacity``."""
    if text.endswith("x-mean"):
        try:
            mult = float(text[: -len("x-mean")])
        except ValueError:
            raise ValueError(f"capacity {text!r}: expected a number before 'x-mean'") from None
        if not mult > 0 or not math.isfinite(mult):
            raise ValueError(f"capacity {text!r} must be a positive multiple of the mean")
        value = math.ceil(min(trace.mean_demand(jobs) * mult, MAX_VCORES + 1.0))
    elif text.endswith("%"):
        try:
            frac = float(text[:-1]) / 100
        except ValueError:
            raise ValueError(f"capacity {text!r}: expected a number before '%'") from None
        if not frac > 0 or not math.isfinite(frac):
            raise ValueError(f"capacity {text!r} must be a finite percentage > 0")
        value = math.floor(min(trace.peak_parallelism(jobs) * frac, MAX_VCORES + 1.0))
    else:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(
                f"capacity {text!r}: expected whole vcores (450), a percentage of the trace's "
                "peak (25%) or a multiple of its mean demand (2x-mean)"
            ) from None
        if value < 1:
            raise ValueError(f"capacity must be >= 1 vcore, got {value}")
    if value > MAX_VCORES:
        raise ValueError(f"capacity {text!r} is over {MAX_VCORES:,} vcores")
    return max(1, value)


def check_length(jobs: Sequence[SimJob], slots: int) -> None:
    """``ValueError`` when ``jobs`` need more than ``MAX_RUN_S`` of simulated time on ``slots``
    containers even at best: all of them busy from the first submission on, or each job on
    ``min(tasks, slots)`` from its own. The run samples every 60 s until its last job ends, so a
    longer one would run for hours (a year takes about half a minute)."""
    if slots < 1:
        raise ValueError("the cluster has no container slots (memory below one container)")
    if not jobs:
        return
    first = min(j.submit_s for j in jobs)
    busy = sum(j.work for j in jobs) / slots
    need = max(busy, max(j.submit_s - first + j.ideal_runtime(slots) for j in jobs))
    if need > MAX_RUN_S:
        raise ValueError(
            f"the workload needs at least {years(need)} of simulated time on {slots} vcores, over "
            f"the limit of {years(MAX_RUN_S)}: give it more capacity or fewer jobs"
        )


def with_deadlines(
    jobs: Sequence[SimJob], kind: str | None, capacity: int, seed: int, basis: str = "ideal"
) -> list[SimJob]:
    """Jobs with synthetic deadlines (``kind=None`` keeps the trace's own, if any)."""
    if kind is None:
        return list(jobs)
    return deadlines.assign_deadlines(jobs, kind, capacity, seed, basis)


def run_policy(
    name: str,
    jobs: Sequence[SimJob],
    spec: ClusterSpec,
    params: Mapping[str, Any] | None = None,
    *,
    interval_s: float = 60.0,
    progress: Progress | None = None,
    start_s: float | None = None,
    model: str = "fluid",
    plan: PlanSettings | None = None,
    decision_log: bool = False,
) -> SimResult:
    """Simulate ``jobs`` under the policy called ``name`` on the cluster ``model``
    (``app.sim.tasks.MODELS``); with ``decision_log``, keep its admission decisions in the
    result (``SimResult.decision_log``: admission policies only)."""
    queues = sorted({j.queue for j in jobs})
    setup = registry.build(name, queues, params, interval_s=interval_s, plan=plan)
    log: list[Decided] = []
    if decision_log:
        record = getattr(setup.allocator, "record_decisions", None)
        if record is None:
            raise ValueError(f"policy {name} makes no admission decisions to log")
        log = record()
    sim = Simulation(
        jobs,
        setup.allocator,
        spec,
        queue_policy=setup.queue_policy,
        progress=progress,
        start_s=start_s,
        model=model,
    )
    result = sim.run()
    result.decisions = dict(getattr(setup.allocator, "decisions", {}))
    result.decision_log = log
    if setup.queue_policy is None and name == registry.FAIR:
        result.allocator = registry.FAIR
    return result


def static_partition_cum(
    jobs: Sequence[SimJob],
    spec: ClusterSpec,
    shares: Mapping[str, float] | None = None,
    on_queue: Callable[[str], None] | None = None,
) -> dict[str, list[float]]:
    """Cumulative vcore-seconds per queue, sampled every 60 s, with each queue alone on its
    static partition (equal shares unless given). All runs start at the first submission."""
    by_queue: dict[str, list[SimJob]] = {}
    for j in jobs:
        by_queue.setdefault(j.queue, []).append(j)
    start = min(j.submit_s for j in jobs)
    out: dict[str, list[float]] = {}
    for q, qjobs in sorted(by_queue.items()):
        if on_queue is not None:
            on_queue(q)
        share = shares[q] if shares is not None else 1.0 / len(by_queue)
        part = ClusterSpec(max(1, math.floor(spec.slots * share)))
        try:
            check_length(qjobs, part.slots)
        except ValueError as exc:
            raise ValueError(f"queue {q} alone on its static partition: {exc}") from None
        result = Simulation(qjobs, BaselineFS(), part, start_s=start).run()
        out[q] = result.series.queue_cum.get(q, [])
    return out
