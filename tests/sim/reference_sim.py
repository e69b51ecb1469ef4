"""The simulator's fair-share clusters and fairness snapshots as they were before the speed-ups
(``Cluster`` of ``app/sim/cluster.py``, ``TaskCluster`` of ``app/sim/tasks.py``,
``snapshot_indexes`` of ``app/sim/metrics.py``), kept verbatim as the reference that
``test_speed_identical.py`` compares the optimised code with: every job's end time, every headline
number and every series must come out the same, to the last bit."""

# ruff: noqa
# mypy: ignore-errors

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from app.sim.cluster import ClusterSpec
from app.sim.engine import PRIORITY_COMPLETION, Engine, Event
from app.sim.jobs import JobRun, Status
from app.sim.metrics import AllocationTally
from app.sim.tasks import task_seconds, wave_runtime, work_done_in_waves

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

PRIORITY_REPLAN = 3
_EPS = 1e-9
_DONE_SLACK = 1e-6


def water_fill(total: float, caps: list[float], weights: list[float]) -> list[float]:
    """Weighted max-min fair split of ``total``: ``a_i = min(cap_i, lam * w_i)``.

    Entries with weight 0 get nothing here; callers spread any remainder separately.
    """
    alloc = [0.0] * len(caps)
    active = [i for i, w in enumerate(weights) if w > 0 and caps[i] > 0]
    left = total
    while active and left > _EPS:
        wsum = sum(weights[i] for i in active)
        lam = left / wsum
        capped = [i for i in active if caps[i] - alloc[i] <= lam * weights[i] + _EPS]
        if not capped:
            for i in active:
                alloc[i] += lam * weights[i]
            return alloc
        for i in capped:
            left -= caps[i] - alloc[i]
            alloc[i] = caps[i]
        active = [i for i in active if i not in set(capped)]
    return alloc


def queue_fill(
    total: float, demand: list[float], shares: list[float], max_caps: list[float]
) -> list[float]:
    """CapacityScheduler-like split: by share up to demand and maximum, then lend the rest.

    Queues with share 0 still borrow idle capacity in the second pass (equal weights), like a
    YARN queue at capacity 0 with a non-zero maximum-capacity.
    """
    caps = [min(d, m) for d, m in zip(demand, max_caps, strict=True)]
    first = water_fill(total, caps, shares)
    left = total - sum(first)
    if left <= _EPS:
        return first
    rest = [c - a for c, a in zip(caps, first, strict=True)]
    extra = water_fill(left, rest, [1.0 if r > _EPS else 0.0 for r in rest])
    return [a + e for a, e in zip(first, extra, strict=True)]


def level_for(alloc: float, caps: FloatArray) -> float:
    """Equal-share level ``lam`` with ``sum(min(cap, lam)) == alloc`` (inf when all fit)."""
    n = caps.size
    if n == 0 or alloc >= caps.sum() - _EPS:
        return float("inf")
    even = alloc / n
    if even <= caps.min():
        return even  # the common constrained case: no job is held back by its own cap
    srt = np.sort(caps)
    before = np.concatenate(([0.0], np.cumsum(srt)[:-1]))
    lam = (alloc - before) / (n - np.arange(n))
    k = int(np.argmax(srt >= lam))
    return float(lam[k])


class FairPool:
    """Fair-share jobs in flat numpy arrays (swap-remove), so a replan is a few vector ops."""

    def __init__(self) -> None:
        size = 64
        self.runs: list[JobRun] = []
        self.rem: FloatArray = np.zeros(size)
        self.cap: FloatArray = np.zeros(size)
        self.rate: FloatArray = np.zeros(size)
        self.qix: IntArray = np.zeros(size, dtype=np.int64)
        # The one addition to the old pool: the arrival column the runner's tally reads.
        self.arrival: IntArray = np.zeros(size, dtype=np.int64)
        self.slot: dict[int, int] = {}

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

    def remove(self, run: JobRun) -> float:
        """Drop ``run`` and return its remaining work."""
        i = self.slot.pop(id(run))
        left = float(self.rem[i])
        last = self.n - 1
        if i != last:
            moved = self.runs[last]
            self.runs[i] = moved
            for arr in (self.rem, self.cap, self.rate, self.qix, self.arrival):
                arr[i] = arr[last]
            self.slot[id(moved)] = i
        self.runs.pop()
        return left

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
        self.granted = 0
        self._granted_by_q: list[float] = []
        self._fixed_events: dict[int, Event] = {}
        self._next_fs: Event | None = None
        self._replan_pending = False
        self._last = engine.now
        self._fs_rate_by_q: FloatArray = np.zeros(0)
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
            self._granted_by_q.append(0.0)
            self.used_integral.append(0.0)
            self._fs_rate_by_q = np.append(self._fs_rate_by_q, 0.0)
        return ix

    def set_shares(self, shares: Mapping[str, float], max_shares: Mapping[str, float]) -> None:
        """Apply a queue policy's decision (fractions of capacity); unnamed queues keep theirs."""
        self.advance()
        for name, share in shares.items():
            self.shares[self.queue_index(name)] = max(0.0, share)
        for name, mx in max_shares.items():
            self.max_shares[self.queue_index(name)] = min(1.0, max(0.0, mx))
        self.request_replan()

    # ----- state ----------------------------------------------------------------------------
    @property
    def free(self) -> int:
        """Vcores not granted to admission-controlled jobs (fair-share jobs may use them)."""
        return self.capacity - self.granted

    def used_by_queue(self) -> list[float]:
        """Vcores held right now per queue (granted plus fair-share rates)."""
        return [g + float(r) for g, r in zip(self._granted_by_q, self._fs_rate_by_q, strict=True)]

    def used_of(self, q: int) -> float:
        """``used_by_queue()[q]`` without building the list (the same arithmetic, so the same
        value: the task model asks this once per queue per container decision)."""
        return self._granted_by_q[q] + float(self._fs_rate_by_q[q])

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
            self.engine.schedule(self.engine.now, self._replan, PRIORITY_REPLAN)

    def advance(self) -> None:
        """Drain work and integrate usage from the last update to now."""
        now = self.engine.now
        dt = now - self._last
        if dt <= 0:
            return
        n = self.pool.n
        if n:
            self.pool.rem[:n] -= self.pool.rate[:n] * dt
        for q, used in enumerate(self.used_by_queue()):
            self.used_integral[q] += used * dt
        self.busy_integral += (self.granted + float(self._fs_rate_by_q.sum())) * dt
        self._last = now

    def _replan(self) -> None:
        # Still "pending" while finished jobs are reported, so that jobs an allocator starts
        # from those callbacks join this water-fill instead of scheduling another one.
        self.advance()
        self._complete_drained()
        self._replan_pending = False
        pool, n = self.pool, self.pool.n
        if self._next_fs is not None:
            self._next_fs.cancel()
            self._next_fs = None
        nq = len(self.queues)
        if n == 0:
            self._fs_rate_by_q = np.zeros(nq)
            return
        qix, cap = pool.qix[:n], pool.cap[:n]
        demand = np.bincount(qix, weights=cap, minlength=nq)
        total = float(self.free)
        allocs = queue_fill(
            total,
            [float(d) for d in demand],
            self.shares,
            [m * self.capacity for m in self.max_shares],
        )
        single = nq == 1
        levels = np.array([self._level(q, allocs[q], qix, cap, single) for q in range(nq)])
        rate = np.minimum(cap, levels[0] if single else levels[qix])
        pool.rate[:n] = rate
        self._fs_rate_by_q = np.bincount(qix, weights=rate, minlength=nq).astype(np.float64)
        self._schedule_next_fs()

    @staticmethod
    def _level(q: int, alloc: float, qix: IntArray, cap: FloatArray, single: bool) -> float:
        if alloc <= _EPS:
            return 0.0
        return level_for(alloc, cap if single else cap[qix == q])

    def _schedule_next_fs(self) -> None:
        n = self.pool.n
        rate = self.pool.rate[:n]
        moving = rate > 0
        if not moving.any():
            return
        ttf = self.pool.rem[:n][moving] / rate[moving]
        at = self.engine.now + max(0.0, float(ttf.min()))
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
        n = self.pool.n
        if not n:
            return
        # Absolute slack in vcore-seconds: completion times are computed to drain the job
        # exactly, so what is left is float noise; a job missed here is caught at the next event.
        done = np.nonzero(self.pool.rem[:n] <= _DONE_SLACK)[0]
        if done.size == 0:
            return
        finished = [self.pool.runs[i] for i in done]
        now = self.engine.now
        for run in finished:
            self.pool.remove(run)
            run.consumed = run.job.work
            self._end(run, _outcome(run, now))


def _outcome(run: JobRun, now: float) -> Status:
    """Success means finishing by the deadline (small float slack for fluid arithmetic)."""
    return Status.SUCCEEDED if now <= run.deadline_at + 1e-6 else Status.MISSED


_HeapEntry = tuple[int, int, int, JobRun]


@dataclass(eq=False, slots=True)
class _Wave:
    width: int
    start: float
    event: Event


@dataclass(eq=False, slots=True)
class _TaskState:
    seq: int
    task_s: float
    todo: int
    done: int = 0
    running: int = 0
    version: int = 0
    waves: dict[float, _Wave] = field(default_factory=dict)


class TaskCluster(Cluster):
    """``Cluster`` with container-granular, non-preemptive fair share and waves for grants.

    ``pool.rate`` holds each fair-share job's running containers, so the runner's samples and
    observations read it exactly as in the fluid model.
    """

    def __init__(self, engine: Engine, spec: ClusterSpec, on_end: Callable[[JobRun], None]):
        super().__init__(engine, spec, on_end)
        self._state: dict[int, _TaskState] = {}
        self._heaps: list[list[_HeapEntry]] = []
        self._arrivals = 0
        self.fs_running = 0

    def queue_index(self, name: str) -> int:
        """As ``Cluster.queue_index``, plus the queue's heap of jobs wanting containers."""
        ix = super().queue_index(name)
        while len(self._heaps) < len(self.queues):
            self._heaps.append([])
        return ix

    @property
    def free(self) -> int:
        """Containers neither granted nor running a fair-share task (a grant cannot preempt)."""
        return self.capacity - self.granted - self.fs_running

    # ----- time -------------------------------------------------------------------------------
    def advance(self) -> None:
        """Integrate usage; nothing drains continuously here (tasks end by events)."""
        now = self.engine.now
        dt = now - self._last
        if dt <= 0:
            return
        for q, used in enumerate(self.used_by_queue()):
            self.used_integral[q] += used * dt
        self.busy_integral += (self.granted + self.fs_running) * dt
        self._last = now

    # ----- admission grants in waves ----------------------------------------------------------
    def start_fixed(self, run: JobRun, cpus: int) -> None:
        """Hold ``cpus`` containers until the last wave of tasks ends."""
        if not 1 <= cpus <= self.free:
            raise ValueError(f"grant of {cpus} vcores does not fit ({self.free} free)")
        self.advance()
        self._begin(run)
        run.grant = cpus
        self.granted += cpus
        self.tally.add(cpus, run.max_cpus)
        self._granted_by_q[self.queue_index(run.job.queue)] += cpus
        done_at = self.engine.now + wave_runtime(run.job.tasks, cpus, task_seconds(run))
        self._fixed_events[id(run)] = self.engine.schedule(
            done_at, lambda: self._finish_fixed(run), PRIORITY_COMPLETION
        )

    # ----- fair share ---------------------------------------------------------------------------
    def start_fair(self, run: JobRun) -> None:
        """Queue ``run``'s tasks for containers; it gets them as they free up."""
        self.advance()
        self._begin(run)
        q = self.queue_index(run.job.queue)
        self.pool.add(run, q)
        state = _TaskState(self._arrivals, task_seconds(run), run.job.tasks)
        self._arrivals += 1
        self._state[id(run)] = state
        self._push(run, state, q)
        self.request_replan()

    def kill(self, run: JobRun, reason: str) -> None:
        """Terminate ``run``; finished tasks and the elapsed part of running ones are consumed."""
        if run.status is not Status.RUNNING:
            return
        self.advance()
        run.reason = reason
        now = self.engine.now
        if run.grant:
            self._fixed_events.pop(id(run)).cancel()
            elapsed = now - self._since(run)
            run.consumed = work_done_in_waves(run.job.tasks, run.grant, task_seconds(run), elapsed)
            self._release_grant(run)
        else:
            state = self._state[id(run)]
            partial = 0.0
            for wave in state.waves.values():
                wave.event.cancel()
                partial += wave.width * (now - wave.start)
            self._release_fair(run, state.running)
            run.consumed = state.done * state.task_s + partial
            self._forget(run)
            self.request_replan()
        self._end(run, Status.KILLED)

    def _replan(self) -> None:
        # Only free containers are handed out: nothing running is ever taken away.
        self.advance()
        self._replan_pending = False
        free = self.free
        while free > 0:
            q = self._pick_queue()
            if q is None:
                return
            limit = min(free, self._room(q)) if self._eligible_queues() == 1 else 1
            run, state, width = self._pick_job(q, limit)
            self._assign(run, state, q, width)
            free -= width

    def _room(self, q: int) -> int:
        """Containers queue ``q`` may still take under its maximum share (YARN assigns a
        container only if it keeps the queue within maxResources)."""
        return math.floor(self.max_shares[q] * self.capacity - self.used_of(q) + _EPS)

    def _eligible_queues(self) -> int:
        return sum(
            1 for q in range(len(self.queues)) if self._head(q) is not None and self._room(q) >= 1
        )

    def _pick_queue(self) -> int | None:
        """The queue furthest below its share (share-0 queues only borrow what is left)."""
        best: tuple[int, float] | None = None
        pick = None
        for q, used in enumerate(self.used_by_queue()):
            if self._room(q) < 1 or self._head(q) is None:
                continue
            share = self.shares[q]
            key = (0, used / share) if share > 0 else (1, used)
            if best is None or key < best:
                best, pick = key, q
        return pick

    def _head(self, q: int) -> _HeapEntry | None:
        heap = self._heaps[q]
        while heap:
            if self._valid(heap[0]):
                return heap[0]
            heapq.heappop(heap)
        return None

    @staticmethod
    def _wants(run: JobRun, state: _TaskState) -> bool:
        return state.todo > 0 and state.running < run.max_cpus

    def _pick_job(self, q: int, limit: int) -> tuple[JobRun, _TaskState, int]:
        """The job with the fewest running containers, and how many containers in a row the
        one-at-a-time rule would give it before another job of the queue comes first."""
        head = self._head(q)
        assert head is not None
        heapq.heappop(self._heaps[q])
        run = head[3]
        state = self._state[id(run)]
        width = min(limit, state.todo, run.max_cpus - state.running)
        nxt = self._head(q)
        if nxt is not None:
            width = min(width, nxt[0] - state.running + (1 if state.seq < nxt[1] else 0))
        return run, state, max(1, width)

    def _assign(self, run: JobRun, state: _TaskState, q: int, width: int) -> None:
        now = self.engine.now
        state.running += width
        state.todo -= width
        state.version += 1
        self.pool.rate[self.pool.slot[id(run)]] = state.running
        self.fs_running += width
        self._fs_rate_by_q[q] += width
        end = now + state.task_s
        wave = state.waves.get(end)
        if wave is not None:
            wave.width += width
        else:
            event = self.engine.schedule(end, self._wave_ender(run, end), PRIORITY_COMPLETION)
            state.waves[end] = _Wave(width, now, event)
        self._push(run, state, q)

    def _wave_ender(self, run: JobRun, end: float) -> Callable[[], None]:
        return lambda: self._wave_done(run, end)

    def _wave_done(self, run: JobRun, end: float) -> None:
        self.advance()
        state = self._state[id(run)]
        wave = state.waves.pop(end)
        state.done += wave.width
        state.version += 1
        self._release_fair(run, wave.width)
        state.running -= wave.width
        if state.done == run.job.tasks:
            self._forget(run)
            run.consumed = run.job.work
            self._end(run, _outcome(run, self.engine.now))
        else:
            self.pool.rate[self.pool.slot[id(run)]] = state.running
            self._push(run, state, self.queue_index(run.job.queue))
        self.request_replan()

    def _release_fair(self, run: JobRun, containers: int) -> None:
        self.fs_running -= containers
        self._fs_rate_by_q[self.queue_index(run.job.queue)] -= containers

    def _push(self, run: JobRun, state: _TaskState, q: int) -> None:
        if self._wants(run, state):
            heap = self._heaps[q]
            heapq.heappush(heap, (state.running, state.seq, state.version, run))
            if len(heap) > 4 * len(self._state) + 64:
                self._compact(q)

    def _compact(self, q: int) -> None:
        # Stale entries (older versions, ended jobs) sink below the valid ones; drop them now and
        # then so that the heap stays proportional to the live jobs.
        live = [e for e in self._heaps[q] if self._valid(e)]
        heapq.heapify(live)
        self._heaps[q] = live

    def _valid(self, entry: _HeapEntry) -> bool:
        run = entry[3]
        state = self._state.get(id(run))
        return state is not None and state.version == entry[2] and self._wants(run, state)

    def _forget(self, run: JobRun) -> None:
        self.pool.remove(run)
        del self._state[id(run)]


def make_cluster(
    model: str, engine: Engine, spec: ClusterSpec, on_end: Callable[[JobRun], None]
) -> Cluster:
    """The reference cluster of ``model``, as ``app.sim.tasks.make_cluster`` made it."""
    return Cluster(engine, spec, on_end) if model == "fluid" else TaskCluster(engine, spec, on_end)


def snapshot_indexes(
    allocs: FloatArray, demands: FloatArray, tally: AllocationTally
) -> tuple[float | None, float | None]:
    """Jain on fraction of demand and equality over the jobs in ``allocs``/``demands`` plus those
    counted in ``tally`` (same definitions as ``fraction_of_demand_index`` and ``equality_index``).
    """
    f = np.minimum(1.0, allocs / demands) if allocs.size else allocs
    n = allocs.size + tally.n
    s, s2 = float(f.sum()) + tally.sum_f, float(np.dot(f, f)) + tally.sum_f2
    fairness = s * s / (n * s2) if n and s2 > 1e-12 else None
    classes = {d: list(v) for d, v in tally.classes.items()}
    if allocs.size:
        uniq, inv, counts = np.unique(demands, return_inverse=True, return_counts=True)
        sums = np.bincount(inv, weights=allocs)
        sqs = np.bincount(inv, weights=allocs * allocs)
        for k, d in enumerate(uniq.tolist()):
            c = classes.setdefault(d, [0.0, 0.0, 0.0])
            c[0] += float(counts[k])
            c[1] += float(sums[k])
            c[2] += float(sqs[k])
    total = weight = 0.0
    for count, sa, sa2 in classes.values():
        if count > 0 and sa2 > 1e-12:
            total += sa * sa / sa2  # Jain x count = sa^2 / (count * sa2) x count
            weight += count
    return fairness, (total / weight if weight else None)
