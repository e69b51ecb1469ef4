"""Task-level, non-preemptive fair share: YARN's FairScheduler at container granularity.

The Justice thesis' Baseline FS (seed 004, chapter 5, and chapter 3's greedy allocation) is YARN's
fair scheduler, which hands out containers one at a time as they free up and never preempts a
running task ("jobs that require large fractions of the total resource pool get their full
allocations, causing jobs that arrive later to block", 5.4.1). ``docs/evaluation.md``, "Task
model", documents this option; the fluid model of ``app/sim/cluster.py`` stays the default.

* A job has ``tasks`` tasks of equal duration ``work / tasks`` (the traces give at most a total
  and a count per job: Google first-19h's ``task_seconds_total`` and ``n_tasks``).
* A free container goes to the queue furthest below its share (least used / share), and inside it
  to the job with the fewest running containers, earlier job first on ties: YARN's memoryless
  FairSharePolicy with equal job weights. A task keeps its container until it finishes; arrivals
  only ever get containers that free up.
* Admission grants (Oracle, PYTHIA, Justice) hold ``grant`` containers for the whole run and run
  the tasks in waves: the job ends after ``ceil(tasks / grant)`` task durations.
* Events are per wave, not per task: containers handed to one job at one instant finish together,
  so they share one completion event.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from app.sim.cluster import Cluster, ClusterSpec
from app.sim.engine import PRIORITY_COMPLETION, Engine, Event
from app.sim.jobs import JobRun, Status

MODELS = ("fluid", "tasks")
"""``fluid``: instant re-sharing (``Cluster``); ``tasks``: this module's ``TaskCluster``."""

_EPS = 1e-9
# (running containers, arrival seq, version, the job's tasks); the first three never tie
_HeapEntry = tuple[int, int, int, "_TaskState"]


def task_seconds(run: JobRun) -> float:
    """Duration of each of the job's tasks: its work spread evenly over its tasks."""
    return run.job.work / run.job.tasks


def wave_runtime(tasks: int, containers: int, task_s: float) -> float:
    """Time to run ``tasks`` equal tasks on ``containers`` containers, in waves."""
    width = min(containers, tasks)
    return -(-tasks // width) * task_s


def work_done_in_waves(tasks: int, containers: int, task_s: float, elapsed: float) -> float:
    """Vcore-seconds consumed after ``elapsed`` seconds of running in waves (for kills)."""
    width = min(containers, tasks)
    waves = min(int(elapsed // task_s), -(-tasks // width))
    finished = min(tasks, waves * width)
    in_flight = min(width, tasks - finished)
    return finished * task_s + in_flight * max(0.0, elapsed - waves * task_s)


@dataclass(eq=False, slots=True)
class _Wave:
    """Containers given to one job at one instant; they all finish ``task_s`` later."""

    width: int
    start: float
    event: Event


@dataclass(eq=False, slots=True)
class _TaskState:
    """A fair-share job's tasks: not started, running, finished."""

    run: JobRun
    seq: int
    q: int  # the job's queue index
    task_s: float
    todo: int
    done: int = 0
    running: int = 0
    version: int = 0  # heap entries with an older version are stale
    live: bool = True  # False once the job ended: all its heap entries are stale
    waves: dict[float, _Wave] = field(default_factory=dict)


class TaskCluster(Cluster):
    """``Cluster`` with container-granular, non-preemptive fair share and waves for grants.

    ``pool.rate`` holds each fair-share job's running containers, so the runner's samples and
    observations read it exactly as in the fluid model. The running containers per queue are
    plain ints (``_running_by_q``, not the fluid model's ``_fs_rate_by_q``): every task start and
    end updates them, and whole numbers add up exactly in any order.
    """

    divisible = False  # a grant runs its tasks in waves

    def __init__(self, engine: Engine, spec: ClusterSpec, on_end: Callable[[JobRun], None]):
        super().__init__(engine, spec, on_end)
        self._state: dict[int, _TaskState] = {}
        self._heaps: list[list[_HeapEntry]] = []
        self._running_by_q: list[int] = []
        self._arrivals = 0
        self.fs_running = 0

    def queue_index(self, name: str) -> int:
        """As ``Cluster.queue_index``, plus the queue's heap of jobs wanting containers."""
        ix = super().queue_index(name)
        while len(self._heaps) < len(self.queues):
            self._heaps.append([])
            self._running_by_q.append(0)
        return ix

    @property
    def free(self) -> int:
        """Containers neither granted nor running a fair-share task (a grant cannot preempt)."""
        return self.capacity - self.granted - self.fs_running

    def used_by_queue(self) -> list[float]:
        """Containers held right now per queue (granted plus running tasks)."""
        return [g + r for g, r in zip(self._granted_by_q, self._running_by_q, strict=True)]

    def used_of(self, q: int) -> float:
        """``used_by_queue()[q]`` without building the list."""
        return self._granted_by_q[q] + self._running_by_q[q]

    # ----- time -------------------------------------------------------------------------------
    def advance(self) -> None:
        """Integrate usage; nothing drains continuously here (tasks end by events)."""
        now = self.engine.now
        dt = now - self._last
        if dt <= 0:
            return
        integral = self.used_integral
        granted_by_q, running_by_q = self._granted_by_q, self._running_by_q
        for q in range(len(integral)):
            integral[q] += (granted_by_q[q] + running_by_q[q]) * dt
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
        state = _TaskState(run, self._arrivals, q, task_seconds(run), run.job.tasks)
        self._arrivals += 1
        self._state[id(run)] = state
        self._push(state)
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
            in_flight = 0.0
            for wave in state.waves.values():
                wave.event.cancel()
                in_flight += wave.width * (now - wave.start)
            self._release_fair(state, state.running)
            run.consumed = state.done * state.task_s + in_flight
            self._forget(state)
            self.request_replan()
        self._end(run, Status.KILLED)

    def _replan(self) -> None:
        # Only free containers are handed out: nothing running is ever taken away. YARN hands
        # them out one at a time; a run of containers that the one-at-a-time rule would give to
        # the same queue (and inside it to the same job) is handed out in one step. This runs
        # once per task end in a busy cluster, so the first look at which queues are open is
        # written out here (``_open`` says the same) rather than called per queue.
        self.advance()
        self._replan_pending = False
        free = self.capacity - self.granted - self.fs_running
        if free <= 0:
            return
        cap, max_shares = self.capacity, self.max_shares
        granted_by_q, running_by_q = self._granted_by_q, self._running_by_q
        wanting = [
            q
            for q in range(len(self.queues))
            if math.floor(max_shares[q] * cap - (granted_by_q[q] + running_by_q[q]) + _EPS) >= 1
            and self._head(q) is not None
        ]
        q, run = -1, 0  # the queue picked and the containers left of its run
        while wanting:
            if len(wanting) == 1:
                q = wanting[0]
                room = self._room(q)
                run = free if free < room else room
            elif not run:
                q, run = self._pick_queue(wanting, free)
            state, width = self._pick_job(q, run)
            self._assign(state, width)
            free -= width
            run -= width
            if free <= 0:
                return
            if not self._open(q):
                wanting.remove(q)
                run = 0

    def _open(self, q: int) -> bool:
        """Whether queue ``q`` has a job wanting a container and room under its maximum; when
        it has, the head of its heap is that job's valid entry."""
        return self._room(q) >= 1 and self._head(q) is not None

    def _room(self, q: int) -> int:
        """Containers queue ``q`` may still take under its maximum share (YARN assigns a
        container only if it keeps the queue within maxResources)."""
        return math.floor(self.max_shares[q] * self.capacity - self.used_of(q) + _EPS)

    def _order(self, q: int, used: float) -> tuple[tuple[int, float], int]:
        """Sort key of queue ``q`` holding ``used``: furthest below its share first (share-0
        queues only borrow what is left), the lower index on ties."""
        share = self.shares[q]
        return ((0, used / share) if share > 0 else (1, used)), q

    def _pick_queue(self, wanting: list[int], free: int) -> tuple[int, int]:
        """The queue a free container goes to, and how many containers in a row it would get
        one at a time before another wanting queue comes first (each one raises its use)."""
        granted_by_q, running_by_q = self._granted_by_q, self._running_by_q
        first = second = None
        for w in wanting:  # the two smallest keys, without sorting them all
            key = self._order(w, granted_by_q[w] + running_by_q[w])
            if first is None or key < first:
                first, second = key, first
            elif second is None or key < second:
                second = key
        assert first is not None and second is not None  # two or more queues want
        q, rival = first[1], second
        used, top = granted_by_q[q] + running_by_q[q], self.max_shares[q] * self.capacity
        run = 1
        while run < free:
            after = used + run
            if math.floor(top - after + _EPS) < 1 or not self._order(q, after) < rival:
                break
            run += 1
        return q, run

    def _head(self, q: int) -> _HeapEntry | None:
        heap = self._heaps[q]
        while heap:
            # A push follows every change of a job's counts, so the entry carrying the job's
            # current version is its only valid one (``_valid``, inlined: once per task end).
            entry = heap[0]
            state = entry[3]
            if (
                state.version == entry[2]
                and state.live
                and state.todo > 0
                and state.running < state.run.max_cpus
            ):
                return entry
            heapq.heappop(heap)
        return None

    @staticmethod
    def _valid(entry: _HeapEntry) -> bool:
        # A push follows every change of a job's counts, so the entry carrying the job's current
        # version is its only valid one.
        state = entry[3]
        return state.live and state.version == entry[2] and TaskCluster._wants(state)

    @staticmethod
    def _wants(state: _TaskState) -> bool:
        return state.todo > 0 and state.running < state.run.max_cpus

    def _pick_job(self, q: int, limit: int) -> tuple[_TaskState, int]:
        """The job with the fewest running containers (the head ``_open`` found), and how many
        containers in a row the one-at-a-time rule would give it before another job of the
        queue comes first."""
        state = heapq.heappop(self._heaps[q])[3]
        if limit == 1:  # the usual pass in a busy cluster: one container freed by one task end
            return state, 1
        running = state.running
        width = min(limit, state.todo, state.run.max_cpus - running)
        nxt = self._head(q)
        if nxt is not None:
            width = min(width, nxt[0] - running + (1 if state.seq < nxt[1] else 0))
        return state, width if width > 1 else 1

    def _assign(self, state: _TaskState, width: int) -> None:
        engine = self.engine
        now = engine.now
        running = state.running = state.running + width
        state.todo -= width
        state.version += 1
        pool = self.pool
        pool.rate[pool.slot[id(state.run)]] = running
        self.fs_running += width
        self._running_by_q[state.q] += width
        end = now + state.task_s
        wave = state.waves.get(end)
        if wave is not None:
            wave.width += width
        else:
            ender = partial(self._wave_done, state, end)
            event = engine.schedule(end, ender, PRIORITY_COMPLETION)
            state.waves[end] = _Wave(width, now, event)
        self._push(state)

    def _wave_done(self, state: _TaskState, end: float) -> None:
        self.advance()
        width = state.waves.pop(end).width
        state.done += width
        state.version += 1
        self._release_fair(state, width)
        state.running -= width
        run = state.run
        if state.done == run.job.tasks:
            self._forget(state)
            run.consumed = run.job.work
            self._end(run, _outcome(run, self.engine.now))
        else:
            pool = self.pool
            pool.rate[pool.slot[id(run)]] = state.running
            self._push(state)
        self.request_replan()

    def _release_fair(self, state: _TaskState, containers: int) -> None:
        self.fs_running -= containers
        self._running_by_q[state.q] -= containers

    def _push(self, state: _TaskState) -> None:
        if self._wants(state):
            heap = self._heaps[state.q]
            heapq.heappush(heap, (state.running, state.seq, state.version, state))
            if len(heap) > 4 * len(self._state) + 64:
                self._compact(state.q)

    def _compact(self, q: int) -> None:
        # Stale entries (older versions, ended jobs) sink below the valid ones; drop them now and
        # then so that the heap stays proportional to the live jobs.
        live = [e for e in self._heaps[q] if self._valid(e)]
        heapq.heapify(live)
        self._heaps[q] = live

    def _forget(self, state: _TaskState) -> None:
        state.live = False
        self.pool.remove(state.run)
        del self._state[id(state.run)]


def _outcome(run: JobRun, now: float) -> Status:
    return Status.SUCCEEDED if now <= run.deadline_at + 1e-6 else Status.MISSED


def make_cluster(
    model: str, engine: Engine, spec: ClusterSpec, on_end: Callable[[JobRun], None]
) -> Cluster:
    """The cluster of ``model`` (one of ``MODELS``)."""
    if model == "fluid":
        return Cluster(engine, spec, on_end)
    if model == "tasks":
        return TaskCluster(engine, spec, on_end)
    raise ValueError(f"unknown model {model!r}; use one of {', '.join(MODELS)}")
