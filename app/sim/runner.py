"""Runs one workload through a simulated cluster under one allocator and one queue policy.

The loop follows the sidecar's tick (``docs/style.md``, "The tick"): every control
interval the runner observes the simulated RM, asks the queue policy for shares (decide), and
applies them to the cluster (actuate), while job arrivals and completions drive the allocator,
as in the Justice thesis' SimPy simulator (seed 004, section 5.2). Measurements for the metrics
of ``app.sim.metrics`` are taken every ``sample_s`` seconds (60 s, section 5.4.1).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from app.sim import metrics
from app.sim.cluster import Cluster, ClusterSpec
from app.sim.engine import PRIORITY_ARRIVAL, PRIORITY_CONTROL, PRIORITY_SAMPLE, Engine
from app.sim.jobs import Decided, JobRun, SimJob, Status
from app.sim.tasks import make_cluster


class SimContext(Protocol):
    """What allocators may use: the clock, the cluster, and dropping a job."""

    @property
    def engine(self) -> Engine:
        """The event engine (to arm timers)."""

    @property
    def cluster(self) -> Cluster:
        """The simulated cluster."""

    @property
    def now(self) -> float:
        """Simulated seconds."""

    def drop(self, run: JobRun, reason: str) -> None:
        """Refuse a job that has not run (or stop tracking one that will never run)."""


class Allocator(Protocol):
    """Decides when and with how many vcores a submitted job runs."""

    name: str

    def bind(self, ctx: SimContext) -> None:
        """Receive the simulation before the first job."""

    def submit(self, run: JobRun) -> None:
        """A job arrived (``ctx.now`` is its submission time)."""

    def ended(self, run: JobRun) -> None:
        """A running job completed or was killed (``run.status`` says which)."""

    def pending(self) -> Iterable[JobRun]:
        """Jobs submitted but held back; they count with ``A_i = 0`` in the fairness indexes."""


@dataclass(frozen=True, slots=True)
class QueueObservation:
    """One queue at a control tick: the inputs of Fawkes' weightings and LTRF's demand.

    ``waiting_*`` follow YARN's view: a job is waiting while it holds less than one container;
    waiting tasks are the containers its jobs still ask for (``maxCPUs - held``).
    """

    waiting_jobs: int
    waiting_tasks: float
    waiting_input_bytes: float
    running_jobs: int
    used_vcores: float  # mean over the interval
    used_fraction: float  # of cluster capacity, mean over the interval
    utilization: float  # used / the queue's guaranteed capacity, capped at 1
    completed_jobs: int
    completed_tasks: int
    demand_vcores: float  # sum of maxCPUs of live jobs
    slowdowns: tuple[float, ...]  # (mean slowdown of live jobs,), or () with none


@dataclass(slots=True)
class _LiveTally:
    """One queue's live jobs at a control tick, summed in one pass (``Simulation._tally_live``).
    The sums start at integer 0, as the built-in ``sum`` they replaced does."""

    jobs: int = 0
    waiting: int = 0
    waiting_tasks: float = 0
    waiting_input_bytes: float = 0
    demand: int = 0
    slowdown_sum: float = 0


@dataclass(frozen=True, slots=True)
class _ArrivalColumns:
    """Per job, in arrival order: what a control tick sums over the live jobs."""

    queue: npt.NDArray[np.int64]
    cpus: npt.NDArray[np.int64]
    input_bytes: npt.NDArray[np.float64]
    submit: npt.NDArray[np.float64]
    ideal: npt.NDArray[np.float64]


def _in_order(values: npt.NDArray[np.float64]) -> float:
    """``sum`` of ``values`` added left to right from the integer 0, as the loop does."""
    return float(values.cumsum()[-1]) if values.size else 0


@dataclass(frozen=True, slots=True)
class QueueDecision:
    """Shares (fractions of capacity) and maximum shares per queue, plus the weights the policy
    considers fair now (``w_i`` of Fawkes' discrimination, eq. 1)."""

    shares: Mapping[str, float]
    max_shares: Mapping[str, float]
    weights: Mapping[str, float]


class QueuePolicy(Protocol):
    """A controller that re-sets queue capacities every ``interval_s``."""

    name: str
    interval_s: float
    # The observation fields beyond the RM's numbers it decides on (``PolicySpec.needs``): the
    # runner fills ``slowdowns`` and ``waiting_input_bytes``, sums over every live job per tick,
    # only when they are read (0 and () otherwise, as the live view carries without them).
    needs: frozenset[str]

    def decide(
        self, now: float, observed: Mapping[str, QueueObservation], capacity: int
    ) -> QueueDecision:
        """Shares for the next interval."""


@dataclass(slots=True)
class Series:
    """Time series measured during a run (lists, cheap to append)."""

    t: list[float] = field(default_factory=list)
    fairness: list[float | None] = field(default_factory=list)
    equality: list[float | None] = field(default_factory=list)
    utilization: list[float] = field(default_factory=list)
    live: list[int] = field(default_factory=list)
    queue_used: dict[str, list[float]] = field(default_factory=dict)  # fraction of capacity
    queue_cum: dict[str, list[float]] = field(default_factory=dict)  # cumulative vcore-s
    control_t: list[float] = field(default_factory=list)
    shares: dict[str, list[float]] = field(default_factory=dict)
    discrimination: dict[str, list[float]] = field(default_factory=dict)
    factor: list[float] = field(default_factory=list)


@dataclass(slots=True)
class SimResult:
    """Everything one run produced."""

    allocator: str
    queue_policy: str
    capacity: int
    runs: list[JobRun]
    series: Series
    busy_vcore_s: float
    start_s: float
    end_s: float
    events: int
    wall_s: float
    decisions: dict[str, int] = field(default_factory=dict)
    # an admission allocator's decisions, where the run asked for them (``run_policy``)
    decision_log: list[Decided] = field(default_factory=list)

    def summary(self) -> dict[str, object]:
        """The headline numbers (plain floats, unrounded)."""
        out = metrics.outcomes(self.runs)
        return {
            "allocator": self.allocator,
            "queue_policy": self.queue_policy,
            "capacity": self.capacity,
            "jobs": out.jobs,
            "succeeded": out.succeeded,
            "missed": out.missed,
            "killed": out.killed,
            "dropped": out.dropped,
            "sdr": out.sdr,
            "ptr": out.ptr,
            "wtr": out.wtr,
            "fairness": metrics.mean(self.series.fairness),
            "equality": metrics.mean(self.series.equality),
            "utilization": metrics.utilization(
                self.busy_vcore_s, self.capacity, self.start_s, self.end_s
            ),
            "mean_slowdown": metrics.mean_slowdown_by_queue(self.runs, self.capacity),
            "final_discrimination_factor": self.series.factor[-1] if self.series.factor else None,
            "makespan_s": self.end_s - self.start_s,
            "events": self.events,
            "wall_s": self.wall_s,
        }


Progress = Callable[[int, int], None]


class Simulation:
    """One run. ``jobs`` must carry deadlines when the allocator needs them."""

    def __init__(
        self,
        jobs: Sequence[SimJob],
        allocator: Allocator,
        spec: ClusterSpec,
        *,
        queue_policy: QueuePolicy | None = None,
        sample_s: float = 60.0,
        progress: Progress | None = None,
        start_s: float | None = None,
        model: str = "fluid",
    ) -> None:
        self._jobs = sorted(jobs, key=lambda j: (j.submit_s, j.job_id))
        self.allocator = allocator
        self.queue_policy = queue_policy
        self._reads_slowdowns = queue_policy is not None and "slowdowns" in queue_policy.needs
        self._reads_input_bytes = (
            queue_policy is not None and "waiting_input_bytes" in queue_policy.needs
        )
        self.sample_s = sample_s
        self._progress = progress
        first = self._jobs[0].submit_s if self._jobs else 0.0
        self._engine = Engine(first if start_s is None else min(start_s, first))
        self._cluster = make_cluster(model, self._engine, spec, self._on_end)
        self._cluster.on_begin = self._on_begin
        self._next = 0
        self._live: dict[int, JobRun] = {}
        self._done: list[JobRun] = []
        self.series = Series()
        self._completed: dict[str, list[JobRun]] = defaultdict(list)
        self._disc: dict[str, float] = {}
        self._last_control_used: list[float] = []
        self._last_control_t = self._engine.now
        self._by_arrival: _ArrivalColumns | None = None
        self._pool_order: npt.NDArray[np.intp] = np.arange(0)  # ``_tally_pool``'s last sort

    # ----- SimContext ----------------------------------------------------------------------
    @property
    def engine(self) -> Engine:
        """The event engine."""
        return self._engine

    @property
    def cluster(self) -> Cluster:
        """The simulated cluster."""
        return self._cluster

    @property
    def now(self) -> float:
        """Simulated time."""
        return self._engine.now

    def drop(self, run: JobRun, reason: str) -> None:
        """Refuse ``run`` before it runs; it counts as submitted and unsuccessful."""
        if run.status is not Status.PENDING:
            raise ValueError(f"job {run.job.job_id} is {run.status.value}, cannot drop")
        self._cluster.tally.remove(0.0, run.max_cpus)
        run.status = Status.DROPPED
        run.end_s = self.now
        run.reason = reason
        self._retire(run)

    # ----- running -----------------------------------------------------------------------------
    def run(self, until: float | None = None) -> SimResult:
        """Simulate until every job has ended (or ``until``) and return the measurements."""
        wall0 = time.perf_counter()
        start = self._engine.now
        for job in self._jobs:
            self._cluster.queue_index(job.queue)
        self._last_control_used = [0.0] * len(self._cluster.queues)
        self.allocator.bind(self)
        self._schedule_arrival()
        self._engine.schedule(start, self._sample, PRIORITY_SAMPLE)
        if self.queue_policy is not None:
            self._engine.schedule(start, self._control, PRIORITY_CONTROL)
        self._engine.run(until)
        end = self._engine.now
        self._cluster.advance()
        runs = self._done + list(self._live.values())
        return SimResult(
            allocator=self.allocator.name,
            queue_policy=self.queue_policy.name if self.queue_policy else "fair",
            capacity=self._cluster.capacity,
            runs=runs,
            series=self.series,
            busy_vcore_s=self._cluster.busy_integral,
            start_s=start,
            end_s=end,
            events=self._engine.processed,
            wall_s=time.perf_counter() - wall0,
        )

    def _busy(self) -> bool:
        return bool(self._live) or self._next < len(self._jobs)

    def _schedule_arrival(self) -> None:
        if self._next < len(self._jobs):
            at = self._jobs[self._next].submit_s
            self._engine.schedule(at, self._arrive, PRIORITY_ARRIVAL)

    def _arrive(self) -> None:
        jobs, now, cap = self._jobs, self.now, self._cluster.capacity
        while self._next < len(jobs) and jobs[self._next].submit_s <= now:
            job = jobs[self._next]
            self._next += 1
            run = JobRun(job, job.max_cpus(cap), arrival=self._next - 1)
            self._live[id(run)] = run
            self._cluster.tally.add(0.0, run.max_cpus)  # waiting: A_i = 0
            self.allocator.submit(run)
        self._schedule_arrival()

    def _on_begin(self, run: JobRun) -> None:
        if run.status is Status.PENDING:
            self._cluster.tally.remove(0.0, run.max_cpus)

    def _on_end(self, run: JobRun) -> None:
        self._retire(run)
        if self.queue_policy is not None:
            self._completed[run.job.queue].append(run)
        self.allocator.ended(run)

    def _retire(self, run: JobRun) -> None:
        del self._live[id(run)]
        self._done.append(run)

    # ----- measurement --------------------------------------------------------------------------
    def _sample(self) -> None:
        cl, s = self._cluster, self.series
        cl.advance()
        n = cl.pool.n
        fairness, equality = metrics.snapshot_indexes(cl.pool.rate[:n], cl.pool.cap[:n], cl.tally)
        s.t.append(self.now)
        s.fairness.append(fairness)
        s.equality.append(equality)
        used = cl.used_by_queue()
        s.utilization.append(sum(used) / cl.capacity if cl.capacity else 0.0)
        s.live.append(len(self._live))
        for q, name in enumerate(cl.queues):
            s.queue_used.setdefault(name, []).append(used[q] / cl.capacity)
            s.queue_cum.setdefault(name, []).append(cl.used_integral[q])
        if self._progress is not None:
            self._progress(len(self._done), len(self._jobs))
        if self._busy():
            self._engine.schedule(self.now + self.sample_s, self._sample, PRIORITY_SAMPLE)

    # ----- control -----------------------------------------------------------------------------
    def _control(self) -> None:
        policy = self.queue_policy
        assert policy is not None
        cl = self._cluster
        cl.advance()
        observed = self._observe()
        decision = policy.decide(self.now, observed, cl.capacity)
        cl.set_shares(decision.shares, decision.max_shares)
        self._record_control(observed, decision)
        if self._busy():
            self._engine.schedule(self.now + policy.interval_s, self._control, PRIORITY_CONTROL)

    def _observe(self) -> dict[str, QueueObservation]:
        cl = self._cluster
        dt = self.now - self._last_control_t
        live = self._tally_live()
        out: dict[str, QueueObservation] = {}
        for q, name in enumerate(cl.queues):
            used = (
                (cl.used_integral[q] - self._last_control_used[q]) / dt
                if dt > 0
                else cl.used_by_queue()[q]
            )
            out[name] = self._observe_queue(name, q, live.get(name) or _LiveTally(), used)
        self._last_control_used = list(cl.used_integral)
        self._last_control_t = self.now
        self._completed.clear()
        return out

    def _tally_live(self) -> dict[str, _LiveTally]:
        """The live jobs summed per queue in the order they are held (the order of the per-queue
        sums this replaced, so every float is the same): as arrays when they are all in the
        fair-share pool, else in one pass."""
        if len(self._live) == self._cluster.pool.n:
            return self._tally_pool()
        return self._tally_each()

    def _tally_each(self) -> dict[str, _LiveTally]:
        """One pass over the live jobs, with the rates read as one list (``Cluster.rate_of`` per
        job was most of a control tick in large workloads)."""
        cl = self._cluster
        capacity = cl.capacity
        rates = cl.pool.rate[: cl.pool.n].tolist()
        slot = cl.pool.slot
        now = self.now
        slowdowns, input_bytes = self._reads_slowdowns, self._reads_input_bytes
        tallies: dict[str, _LiveTally] = {}
        for run in self._live.values():
            name = run.job.queue
            t = tallies.get(name)
            if t is None:
                t = tallies[name] = _LiveTally()
            if run.grant:
                held = float(run.grant)
            else:
                i = slot.get(id(run))
                held = 0.0 if i is None else rates[i]
            t.jobs += 1
            if held < 1.0:
                t.waiting += 1
                if input_bytes:
                    t.waiting_input_bytes += run.job.input_bytes
            t.waiting_tasks += max(0.0, run.max_cpus - held)
            t.demand += run.max_cpus
            if slowdowns:
                t.slowdown_sum += (now - run.job.submit_s) / run.job.ideal_runtime(capacity)
        return tallies

    def _tally_pool(self) -> dict[str, _LiveTally]:
        """``_tally_live`` when every live job is a fair-share job of the pool (queue controllers
        run over Baseline FS): the same sums as arrays. The pool is put in arrival order, the
        order of ``_live``, and each float sum is a ``cumsum``, which adds left to right as the
        loop does.

        One sort on (queue, arrival) lays each queue's jobs out as one run in arrival order, so a
        queue's sums read a slice instead of masking every job once per queue. The keys are
        unique, so every sort gives this order. Only the float sums need that order: the jobs,
        the waiting jobs and the demands (whole numbers, exact in any order) are counted per
        queue in pool order, so a policy that reads no optional field costs a handful of array
        operations per tick instead of a dozen per queue."""
        cl = self._cluster
        pool = cl.pool
        n = pool.n
        nq = len(cl.queues)
        arrival, qix, rate = pool.arrival[:n], pool.qix[:n], pool.rate[:n]
        keys = qix * len(self._jobs) + arrival
        # The last tick's order, as a permutation of today's slots (slots past the end dropped,
        # new ones appended), is nearly sorted: few slots changed job since. Sorting the keys in
        # that order is a few merges instead of a full sort, and as the keys are unique it ends
        # in the same order as sorting them afresh.
        last = self._pool_order
        guess = np.concatenate((last[last < n], np.arange(last.size, n)))
        order = guess[keys[guess].argsort(kind="stable")]
        self._pool_order = order
        # ``maxCPUs - held``: the pool's caps are the jobs' ``max_cpus``, as floats.
        short = np.maximum(0.0, pool.cap[:n] - rate)[order]
        waiting = rate < 1.0
        waiting_by_q = (
            np.bincount(qix[waiting], minlength=nq).tolist() if waiting.any() else [0] * nq
        )
        input_bytes = slowdown = mine_waiting = None
        if self._reads_input_bytes or self._reads_slowdowns:
            cols = self._arrival_columns()
            ks = arrival[order]
            mine_waiting = waiting[order]
            if self._reads_input_bytes:
                input_bytes = cols.input_bytes[ks]
            if self._reads_slowdowns:
                slowdown = (self.now - cols.submit[ks]) / cols.ideal[ks]
        counts = np.bincount(qix, minlength=nq).tolist()
        # Whole vcores summed as floats: exact (far below 2**53) in any order.
        demands = np.bincount(qix, weights=pool.cap[:n], minlength=nq).tolist()
        tallies: dict[str, _LiveTally] = {}
        start = 0
        for q, name in enumerate(cl.queues):
            jobs = counts[q]
            if not jobs:
                continue
            mine = slice(start, start + jobs)
            start += jobs
            tallies[name] = _LiveTally(
                jobs=jobs,
                waiting=waiting_by_q[q],
                waiting_tasks=_in_order(short[mine]),
                waiting_input_bytes=(
                    0
                    if input_bytes is None or mine_waiting is None
                    else _in_order(input_bytes[mine][mine_waiting[mine]])
                ),
                demand=int(demands[q]),
                slowdown_sum=0 if slowdown is None else _in_order(slowdown[mine]),
            )
        return tallies

    def _arrival_columns(self) -> _ArrivalColumns:
        if self._by_arrival is None:
            cl, cap = self._cluster, self._cluster.capacity
            jobs = self._jobs
            self._by_arrival = _ArrivalColumns(
                queue=np.array([cl.queue_index(j.queue) for j in jobs], dtype=np.int64),
                cpus=np.array([j.max_cpus(cap) for j in jobs], dtype=np.int64),
                input_bytes=np.array([j.input_bytes for j in jobs], dtype=np.float64),
                submit=np.array([j.submit_s for j in jobs], dtype=np.float64),
                ideal=np.array([j.ideal_runtime(cap) for j in jobs], dtype=np.float64),
            )
        return self._by_arrival

    def _observe_queue(self, name: str, q: int, live: _LiveTally, used: float) -> QueueObservation:
        cl = self._cluster
        done = [r for r in self._completed.get(name, []) if r.status is not Status.KILLED]
        guaranteed = cl.shares[q] * cl.capacity
        # Fawkes' JS weight is the mean of the listed slowdowns, so the mean alone is passed:
        # validating thousands of values per tick dominated the run time of large workloads.
        slowdowns = (live.slowdown_sum / live.jobs,) if live.jobs and self._reads_slowdowns else ()
        return QueueObservation(
            waiting_jobs=live.waiting,
            waiting_tasks=live.waiting_tasks,
            waiting_input_bytes=live.waiting_input_bytes,
            running_jobs=live.jobs - live.waiting,
            used_vcores=used,
            used_fraction=used / cl.capacity if cl.capacity else 0.0,
            utilization=min(1.0, used / guaranteed) if guaranteed > 0 else 0.0,
            completed_jobs=len(done),
            completed_tasks=sum(r.max_cpus for r in done),
            demand_vcores=float(live.demand),
            slowdowns=slowdowns,
        )

    def _record_control(
        self, observed: Mapping[str, QueueObservation], decision: QueueDecision
    ) -> None:
        s = self.series
        dt = self.now - s.control_t[-1] if s.control_t else 0.0
        active = {q: w for q, w in decision.weights.items() if math.isfinite(w)}
        used = {q: o.used_fraction for q, o in observed.items()}
        self._disc, factor = metrics.discrimination_step(self._disc, used, active, dt)
        s.control_t.append(self.now)
        s.factor.append(factor)
        for q in self._cluster.queues:
            s.shares.setdefault(q, []).append(float(decision.shares.get(q, 0.0)))
            s.discrimination.setdefault(q, []).append(self._disc.get(q, 0.0))
