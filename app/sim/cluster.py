"""A simulated YARN cluster: capacity, queues and the incumbent fair-share scheduler.

Model (documented in ``docs/evaluation.md``, "Modelling choices"):

* Capacity is counted in containers of one vcore and ``container_mb`` of memory, so the usable
  slots are ``min(vcores, memory_mb // container_mb)``; memory use is containers x container_mb.
* Job-level fluid model rather than per-task events: a running job holds a rate of vcores and its
  remaining work (vcore-seconds) drains at that rate, perfect parallelism as the Justice thesis
  assumes (seed 004, section 5.1.1). This keeps one event per arrival and completion.
* Two ways to hold resources. An admission allocator (Oracle, PYTHIA, Justice) *grants* a job a
  fixed integer number of vcores that never changes (seed 004, section 5.1.2: "Once a job run
  commences, its CPU allocation does not change"). Everything else is shared by the memoryless,
  work-conserving fair scheduler of YARN/Mesos (seed 002, section 9.4.2, MLRF): at each scheduling
  event the remaining capacity is water-filled over queues by their configured shares (capped by
  demand and by each queue's maximum share, left-over spread again, which is how YARN lends idle
  capacity), then inside each queue equally over its jobs, each capped at ``maxCPUs``.
* A queue policy (Fawkes, LTRF, ...) changes queue shares every control interval, as the sidecar's
  controller changes CapacityScheduler capacities.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.sim.engine import PRIORITY_COMPLETION, Engine, Event
from app.sim.jobs import JobRun, Status
from app.sim.metrics import AllocationTally

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

PRIORITY_REPLAN = 3  # after every arrival at the same instant: one water-fill per instant
_EPS = 1e-9
_DONE_SLACK = 1e-6


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """Resources of the simulated cluster."""

    vcores: int
    memory_mb: int | None = None
    container_mb: int = 1024

    @property
    def slots(self) -> int:
        """Containers that fit: the scheduling capacity used everywhere in the simulator."""
        if self.memory_mb is None:
            return self.vcores
        return max(0, min(self.vcores, self.memory_mb // self.container_mb))


def water_fill(total: float, caps: list[float], weights: list[float]) -> list[float]:
    """Weighted max-min fair split of ``total``: ``a_i = min(cap_i, lam * w_i)``.

    Entries with weight 0 get nothing here; callers spread any remainder separately.
    """
    alloc = [0.0] * len(caps)
    active = [i for i, w in enumerate(weights) if w > 0 and caps[i] > 0]
    left = total
    while active and left > _EPS:
        wsum: float = 0  # the same additions as ``sum()``, without a generator per round
        for i in active:
            wsum += weights[i]
        lam = left / wsum
        capped = [i for i in active if caps[i] - alloc[i] <= lam * weights[i] + _EPS]
        if not capped:
            for i in active:
                alloc[i] += lam * weights[i]
            return alloc
        for i in capped:
            left -= caps[i] - alloc[i]
            alloc[i] = caps[i]
        if len(capped) == len(active):
            break
        done = set(capped)
        active = [i for i in active if i not in done]
    return alloc


def queue_fill(
    total: float, demand: list[float], shares: list[float], max_caps: list[float]
) -> list[float]:
    """CapacityScheduler-like split: by share up to demand and maximum, then lend the rest.

    Queues with share 0 still borrow idle capacity in the second pass (equal weights), like a
    YARN queue at capacity 0 with a non-zero maximum-capacity.
    """
    caps = [m if m < d else d for d, m in zip(demand, max_caps, strict=True)]  # ``min(d, m)``
    first = water_fill(total, caps, shares)
    left = total - sum(first)
    if left <= _EPS:
        return first
    rest = [c - a for c, a in zip(caps, first, strict=True)]
    extra = water_fill(left, rest, [1.0 if r > _EPS else 0.0 for r in rest])
    return [a + e for a, e in zip(first, extra, strict=True)]


def level_for(alloc: float, caps: FloatArray) -> float:
    """Equal-share level ``lam`` with ``sum(min(cap, lam)) == alloc`` (inf when all fit), for
    caps in whole vcores."""
    held = Counter(int(c) for c in caps.tolist())
    return level_for_counts(
        alloc, caps.size, sum(c * k for c, k in held.items()), sorted(held), held
    )


def level_for_counts(
    alloc: float, n: int, total: int, caps: list[int], held: Mapping[int, int]
) -> float:
    """``level_for`` of ``n`` jobs with whole-number caps summing to ``total``, given as the
    distinct ``caps`` in ascending order and how many jobs hold each (``held``).

    The level is ``lam_k`` of the first ``k`` in the sorted caps with ``cap_k >= lam_k``, where
    ``lam_k = (alloc - sum of the caps before k) / (n - k)``. Along ``c`` equal caps ``v``,
    ``v - lam_(k+1) = (v - lam_k) (n - k) / (n - k - 1)``: the sign stays and the gap widens, so
    one comparison decides the whole run unless ``v`` and ``lam_k`` are within float rounding,
    where each ``k`` is compared as ``level_for`` does.
    """
    if n == 0 or alloc >= total - _EPS:
        return float("inf")
    even = alloc / n
    if even <= caps[0]:
        return even
    before = k = 0
    for v in caps:
        c = held[v]
        lam = (alloc - before) / (n - k)
        if v >= lam:
            return lam
        if lam - v <= 1e-9 * lam:  # a near tie: rounding may decide differently further on
            for j in range(1, c):
                lam = (alloc - (before + j * v)) / (n - k - j)
                if v >= lam:
                    return lam
        before += c * v
        k += c
    return alloc / n  # no cap reaches its level (only by rounding): the first level, as numpy's
    # argmax over all-False comparisons of the array version this replaced


class FairPool:
    """Fair-share jobs in flat numpy arrays (swap-remove), so a replan is a few vector ops.

    Per queue it also keeps the number of jobs, the sum of their caps and the distinct caps with
    how many jobs hold each, as the pool changes: a replan reads these instead of masking and
    sorting the arrays per queue. Caps are whole vcores, so the sums are exact.
    """

    def __init__(self) -> None:
        size = 64
        self.runs: list[JobRun] = []
        self.rem: FloatArray = np.zeros(size)
        self.cap: FloatArray = np.zeros(size)
        self.rate: FloatArray = np.zeros(size)
        self.qix: IntArray = np.zeros(size, dtype=np.int64)
        self.arrival: IntArray = np.zeros(size, dtype=np.int64)  # ``JobRun.arrival``
        self.slot: dict[int, int] = {}
        self.jobs_by_q: list[int] = []
        self.demand_by_q: list[int] = []
        self.caps_by_q: list[list[int]] = []  # distinct caps, ascending
        self.held_by_q: list[dict[int, int]] = []  # cap -> jobs holding it

    @property
    def n(self) -> int:
        """Number of jobs in the pool."""
        return len(self.runs)

    def add(self, run: JobRun, qix: int) -> None:
        """Append ``run`` with all its work remaining."""
        i = self.n
        if i == self.rem.size:
            self._grow()
        self.runs.append(run)
        self.rem[i] = run.job.work - run.consumed
        self.cap[i] = run.max_cpus
        self.rate[i] = 0.0
        self.qix[i] = qix
        self.arrival[i] = run.arrival
        self.slot[id(run)] = i
        self._count(qix, run.max_cpus, 1)

    def remove(self, run: JobRun) -> float:
        """Drop ``run`` and return its remaining work."""
        i = self.slot.pop(id(run))
        left = float(self.rem[i])
        self._count(int(self.qix[i]), run.max_cpus, -1)
        last = self.n - 1
        if i != last:
            moved = self.runs[last]
            self.runs[i] = moved
            for arr in (self.rem, self.cap, self.rate, self.qix, self.arrival):
                arr[i] = arr[last]
            self.slot[id(moved)] = i
        self.runs.pop()
        return left

    def _count(self, q: int, cap: int, sign: int) -> None:
        while len(self.jobs_by_q) <= q:
            self.jobs_by_q.append(0)
            self.demand_by_q.append(0)
            self.caps_by_q.append([])
            self.held_by_q.append({})
        self.jobs_by_q[q] += sign
        self.demand_by_q[q] += sign * cap
        held = self.held_by_q[q]
        now = held.get(cap, 0) + sign
        if now:
            held[cap] = now
            if now == 1 and sign > 0:
                bisect.insort(self.caps_by_q[q], cap)
        else:
            del held[cap]
            self.caps_by_q[q].remove(cap)

    def _grow(self) -> None:
        size = self.rem.size * 2
        self.rem = np.resize(self.rem, size)
        self.cap = np.resize(self.cap, size)
        self.rate = np.resize(self.rate, size)
        self.qix = np.resize(self.qix, size)
        self.arrival = np.resize(self.arrival, size)


class Cluster:
    """Runs jobs on ``spec.slots`` vcores; calls ``on_end(run)`` when a job leaves.

    ``on_end`` is called after the job's status and ``end_s`` are set.
    """

    divisible = True
    """A fixed grant of ``g`` vcores runs its job's work in ``work / g`` (perfect parallelism,
    no waves of whole tasks): what an admission planner that knows the model plans with."""

    def __init__(self, engine: Engine, spec: ClusterSpec, on_end: Callable[[JobRun], None]):
        self.engine = engine
        self.spec = spec
        self.capacity = spec.slots
        self._on_end = on_end
        self.pool = FairPool()
        self.queues: list[str] = []
        self._qindex: dict[str, int] = {}
        self.shares: list[float] = []
        self.max_shares: list[float] = []
        self._max_vcores: list[float] | None = None  # ``max_shares`` x capacity, until they change
        self.granted = 0
        self._granted_by_q: list[float] = []
        self._fixed_events: dict[int, Event] = {}
        self._next_fs: Event | None = None
        self._replan_pending = False
        self._last = engine.now
        # Whether some remaining work changed since the last look for drained jobs: a replan
        # right after a completion at the same instant need not look again.
        self._drain_unchecked = False
        self._fs_rate_by_q: FloatArray = np.zeros(0)
        # The same rates as Python floats and their numpy total, read at every event.
        self._fs_rates: list[float] = []
        self._fs_total = 0.0
        self.busy_integral = 0.0
        self.used_integral: list[float] = []
        self.tally = AllocationTally()  # fixed grants, for the fairness snapshots
        self.on_begin: Callable[[JobRun], None] | None = None

    # ----- queues -------------------------------------------------------------------------
    def queue_index(self, name: str) -> int:
        """Index of queue ``name``, created with share 1 and maximum 1 on first use."""
        ix = self._qindex.get(name)
        if ix is None:
            ix = len(self.queues)
            self._qindex[name] = ix
            self.queues.append(name)
            self.shares.append(1.0)
            self.max_shares.append(1.0)
            self._max_vcores = None
            self._granted_by_q.append(0.0)
            self.used_integral.append(0.0)
            self._set_fs_rates(np.append(self._fs_rate_by_q, 0.0))
        return ix

    def set_shares(self, shares: Mapping[str, float], max_shares: Mapping[str, float]) -> None:
        """Apply a queue policy's decision (fractions of capacity); unnamed queues keep theirs."""
        self.advance()
        for name, share in shares.items():
            self.shares[self.queue_index(name)] = max(0.0, share)
        for name, mx in max_shares.items():
            self.max_shares[self.queue_index(name)] = min(1.0, max(0.0, mx))
        self._max_vcores = None
        self.request_replan()

    # ----- state ----------------------------------------------------------------------------
    @property
    def free(self) -> int:
        """Vcores not granted to admission-controlled jobs (fair-share jobs may use them)."""
        return self.capacity - self.granted

    def used_by_queue(self) -> list[float]:
        """Vcores held right now per queue (granted plus fair-share rates)."""
        return [g + r for g, r in zip(self._granted_by_q, self._fs_rates, strict=True)]

    def used_of(self, q: int) -> float:
        """``used_by_queue()[q]`` without building the list (the same arithmetic, so the same
        value)."""
        return self._granted_by_q[q] + self._fs_rates[q]

    def running_fair(self) -> list[JobRun]:
        """Fair-share jobs currently running."""
        return list(self.pool.runs)

    def rate_of(self, run: JobRun) -> float:
        """Vcores ``run`` holds right now."""
        if run.grant:
            return float(run.grant)
        i = self.pool.slot.get(id(run))
        return 0.0 if i is None else float(self.pool.rate[i])

    # ----- starting and stopping -----------------------------------------------------------
    def start_fair(self, run: JobRun) -> None:
        """Run ``run`` under fair share from now on."""
        self.advance()
        self._begin(run)
        self.pool.add(run, self.queue_index(run.job.queue))
        self._drain_unchecked = True
        self.request_replan()

    def start_fixed(self, run: JobRun, cpus: int) -> None:
        """Run ``run`` on ``cpus`` vcores held until it ends; the grant must fit in ``free``."""
        if not 1 <= cpus <= self.free:
            raise ValueError(f"grant of {cpus} vcores does not fit ({self.free} free)")
        self.advance()
        self._begin(run)
        run.grant = cpus
        self.granted += cpus
        self.tally.add(cpus, run.max_cpus)
        self._granted_by_q[self.queue_index(run.job.queue)] += cpus
        done_at = self.engine.now + (run.job.work - run.consumed) / cpus
        self._fixed_events[id(run)] = self.engine.schedule(
            done_at, lambda: self._finish_fixed(run), PRIORITY_COMPLETION
        )
        if self.pool.n:
            self.request_replan()

    def kill(self, run: JobRun, reason: str) -> None:
        """Terminate a running job; its work so far counts as consumed."""
        if run.status is not Status.RUNNING:
            return
        self.advance()
        run.reason = reason
        if run.grant:
            self._fixed_events.pop(id(run)).cancel()
            run.consumed += run.grant * (self.engine.now - self._since(run))
            self._release_grant(run)
        else:
            left = self.pool.remove(run)
            run.consumed = run.job.work - left
            self.request_replan()
        self._end(run, Status.KILLED)

    def _since(self, run: JobRun) -> float:
        assert run.start_s is not None
        return run.start_s

    def _begin(self, run: JobRun) -> None:
        if self.on_begin is not None:
            self.on_begin(run)
        run.status = Status.RUNNING
        run.start_s = self.engine.now

    def _end(self, run: JobRun, status: Status) -> None:
        run.status = status
        run.end_s = self.engine.now
        self._on_end(run)

    def _release_grant(self, run: JobRun) -> None:
        self.granted -= run.grant
        self.tally.remove(run.grant, run.max_cpus)
        self._granted_by_q[self.queue_index(run.job.queue)] -= run.grant
        if self.pool.n:
            self.request_replan()

    def _finish_fixed(self, run: JobRun) -> None:
        self.advance()
        del self._fixed_events[id(run)]
        run.consumed = run.job.work
        self._release_grant(run)
        self._end(run, _outcome(run, self.engine.now))

    # ----- fair share -----------------------------------------------------------------------
    def request_replan(self) -> None:
        """Recompute fair shares once, after all events at the current instant."""
        if not self._replan_pending:
            self._replan_pending = True
            self.engine.defer(self._replan, PRIORITY_REPLAN)

    def advance(self) -> None:
        """Drain work and integrate usage from the last update to now."""
        now = self.engine.now
        dt = now - self._last
        if dt <= 0:
            return
        pool = self.pool
        n = len(pool.runs)
        if n:
            pool.rem[:n] -= pool.rate[:n] * dt
            self._drain_unchecked = True
        integral = self.used_integral
        for q, (g, r) in enumerate(zip(self._granted_by_q, self._fs_rates, strict=True)):
            integral[q] += (g + r) * dt
        self.busy_integral += (self.granted + self._fs_total) * dt
        self._last = now

    def _set_fs_rates(self, by_q: FloatArray) -> None:
        self._fs_rate_by_q = by_q
        self._fs_rates = by_q.tolist()
        self._fs_total = float(np.add.reduce(by_q))  # ``by_q.sum()`` without its Python wrapper

    def _replan(self) -> None:
        # Still "pending" while finished jobs are reported, so that jobs an allocator starts
        # from those callbacks join this water-fill instead of scheduling another one.
        self.advance()
        self._complete_drained()
        self._replan_pending = False
        pool = self.pool
        n = len(pool.runs)
        if self._next_fs is not None:
            self._next_fs.cancel()
            self._next_fs = None
        nq = len(self.queues)
        if n == 0:
            self._set_fs_rates(np.zeros(nq))
            return
        demand = [float(d) for d in pool.demand_by_q]
        demand += [0.0] * (nq - len(demand))
        max_vcores = self._max_vcores
        if max_vcores is None:
            max_vcores = self._max_vcores = [m * self.capacity for m in self.max_shares]
        allocs = queue_fill(float(self.free), demand, self.shares, max_vcores)
        jobs = pool.jobs_by_q
        levels: list[float] = []
        all_moving = True
        for q, alloc in enumerate(allocs):
            level = self._level(q, alloc)
            levels.append(level)
            # A queue given anything gives each of its jobs a positive rate (caps are >= 1).
            if not level > 0 and q < len(jobs) and jobs[q]:
                all_moving = False
        qix, rate = pool.qix[:n], pool.rate[:n]
        np.minimum(pool.cap[:n], levels[0] if nq == 1 else np.array(levels)[qix], out=rate)
        self._set_fs_rates(np.asarray(np.bincount(qix, weights=rate, minlength=nq), np.float64))
        self._schedule_next_fs(all_moving)

    def _level(self, q: int, alloc: float) -> float:
        if alloc <= _EPS:
            return 0.0
        pool = self.pool
        if q >= len(pool.jobs_by_q) or not pool.jobs_by_q[q]:
            return float("inf")
        return level_for_counts(
            alloc, pool.jobs_by_q[q], pool.demand_by_q[q], pool.caps_by_q[q], pool.held_by_q[q]
        )

    def _schedule_next_fs(self, all_moving: bool) -> None:
        pool = self.pool
        n = len(pool.runs)
        rem, rate = pool.rem[:n], pool.rate[:n]
        if all_moving:
            ttf = rem / rate
        else:
            moving = rate > 0
            if not moving.any():
                return
            ttf = rem[moving] / rate[moving]
        at = self.engine.now + max(0.0, float(np.minimum.reduce(ttf)))
        self._next_fs = self.engine.schedule(at, self._on_fs_completion, PRIORITY_COMPLETION)

    def _on_fs_completion(self) -> None:
        # Report completions now, at completion priority, so that a job finishing exactly at its
        # deadline ends before any deadline timer of the same instant fires.
        self._next_fs = None
        self.advance()
        self._replan_pending = True
        try:
            self._complete_drained()
        finally:
            self._replan_pending = False
        self.request_replan()

    def _complete_drained(self) -> None:
        pool = self.pool
        n = len(pool.runs)
        if not n or not self._drain_unchecked:
            return
        self._drain_unchecked = False
        # Absolute slack in vcore-seconds: completion times are computed to drain the job
        # exactly, so what is left is float noise; a job missed here is caught at the next event.
        # Most looks find nothing: one minimum decides that without listing the indices.
        rem = pool.rem[:n]
        if float(np.minimum.reduce(rem)) > _DONE_SLACK:
            return
        finished = [pool.runs[i] for i in (rem <= _DONE_SLACK).nonzero()[0]]
        now = self.engine.now
        for run in finished:
            self.pool.remove(run)
            run.consumed = run.job.work
            self._end(run, _outcome(run, now))


def _outcome(run: JobRun, now: float) -> Status:
    """Success means finishing by the deadline (small float slack for fluid arithmetic)."""
    return Status.SUCCEEDED if now <= run.deadline_at + 1e-6 else Status.MISSED
